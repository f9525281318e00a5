package worldmodel_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/worldmodel"
	"github.com/agentworld/agentworld/internal/worldmodel/fakellm"
)

// TestClientRetriesTransientFailures checks the retry policy against a fake
// server that fails each request's first attempts in one of the ways real
// servers do.
func TestClientRetriesTransientFailures(t *testing.T) {
	cases := []struct {
		name string
		fail fakellm.Reply
	}{
		{"429", fakellm.Reply{Status: http.StatusTooManyRequests}},
		{"500", fakellm.Reply{Status: http.StatusInternalServerError}},
		{"503", fakellm.Reply{Status: http.StatusServiceUnavailable}},
		{"dropped connection", fakellm.Reply{Drop: true}},
		{"timeout", fakellm.Reply{Delay: 2 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
				if n.Add(1) <= 2 {
					return tc.fail
				}
				return fakellm.Reply{Content: "ok", Reasoning: "thought", FinishReason: "stop", PromptTokens: 7, CompletionTokens: 3}
			})
			defer srv.Close()
			c := worldmodel.New(srv.URL, "m", &worldmodel.Options{Timeout: 300 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond})
			resp, err := c.Complete(context.Background(), worldmodel.Request{Messages: []worldmodel.Message{{Role: "user", Content: "hi"}}})
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if resp.Content != "ok" || resp.Reasoning != "thought" || resp.Attempts != 3 || resp.PromptTokens != 7 || resp.CompletionTokens != 3 {
				t.Fatalf("resp = %+v, want ok/thought after 3 attempts with usage", resp)
			}
			if got := srv.Count(); got != 3 {
				t.Fatalf("server saw %d requests, want 3", got)
			}
		})
	}
}

func TestClientGivesUpAsUnavailable(t *testing.T) {
	srv := fakellm.New(func(*fakellm.Request) fakellm.Reply { return fakellm.Reply{Status: 500} })
	defer srv.Close()
	c := worldmodel.New(srv.URL, "m", &worldmodel.Options{MaxRetries: 2, MaxRetryDelay: 5 * time.Millisecond})
	_, err := c.Complete(context.Background(), worldmodel.Request{Messages: []worldmodel.Message{{Role: "user", Content: "hi"}}})
	if !errors.Is(err, worldmodel.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if got := srv.Count(); got != 3 {
		t.Fatalf("server saw %d requests, want 1 + 2 retries", got)
	}

	bad := fakellm.New(func(*fakellm.Request) fakellm.Reply { return fakellm.Reply{Status: 400} })
	defer bad.Close()
	c = worldmodel.New(bad.URL, "m", &worldmodel.Options{MaxRetryDelay: 5 * time.Millisecond})
	_, err = c.Complete(context.Background(), worldmodel.Request{Messages: []worldmodel.Message{{Role: "user", Content: "hi"}}})
	if !errors.Is(err, worldmodel.ErrRejected) || bad.Count() != 1 {
		t.Fatalf("err = %v after %d requests, want ErrRejected after 1", err, bad.Count())
	}
}

func TestClientReportsLengthAndSendsParameters(t *testing.T) {
	srv := fakellm.New(func(*fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "", Reasoning: "long thinking", FinishReason: "length"}
	})
	defer srv.Close()
	c := worldmodel.New(srv.URL, "m", nil)
	temp := 0.6
	resp, err := c.Complete(context.Background(), worldmodel.Request{
		Messages:    []worldmodel.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}},
		MaxTokens:   32768,
		Temperature: &temp,
		Extra:       map[string]any{"top_k": 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Truncated() || resp.Reasoning != "long thinking" {
		t.Fatalf("resp = %+v, want truncated with reasoning", resp)
	}
	body := srv.Requests()[0].Body
	if body["max_tokens"] != float64(32768) || body["temperature"] != 0.6 || body["top_k"] != float64(20) || body["model"] != "m" {
		t.Fatalf("body = %v", body)
	}
	for _, k := range []string{"top_p", "seed", "max_completion_tokens"} {
		if _, ok := body[k]; ok {
			t.Errorf("body sends %s, want only what was set", k)
		}
	}
}

// TestClientReadsAnswersWhateverTheirContentType checks that a chat
// completion labelled text/plain is still read, and that a body that is not
// a chat completion is reported as the server failing, with the body quoted.
func TestClientReadsAnswersWhateverTheirContentType(t *testing.T) {
	cases := []struct {
		name, body string
		wantErr    error
	}{
		{"json labelled text", `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`, nil},
		{"html error page", `<html>502 Bad Gateway</html>`, worldmodel.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			resp, err := worldmodel.New(srv.URL+"/v1", "m", &worldmodel.Options{MaxRetries: -1}).Complete(context.Background(), worldmodel.Request{Messages: []worldmodel.Message{{Role: "user", Content: "hi"}}})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), "502 Bad Gateway") {
					t.Fatalf("err = %v, want %v quoting the body", err, tc.wantErr)
				}
				return
			}
			if err != nil || resp.Content != "ok" {
				t.Fatalf("Complete = %+v, %v", resp, err)
			}
		})
	}
}
