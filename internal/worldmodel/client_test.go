package worldmodel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/worldmodel"
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

// TestClientSendsCredentialsAndNamesServerErrors checks the headers of a
// request and that a refused request's error carries what the server said.
func TestClientSendsCredentialsAndNamesServerErrors(t *testing.T) {
	cases := []struct {
		name, body string
		status     int
		want       string
		wantErr    error
	}{
		{"openai error", `{"error":{"message":"model m does not exist","type":"invalid_request_error"}}`, 404, "model m does not exist", worldmodel.ErrRejected},
		{"vllm error", `{"object":"error","message":"maximum context length is 4096 tokens","code":400}`, 400, "maximum context length is 4096 tokens", worldmodel.ErrRejected},
		{"fastapi detail", `{"detail":"Not authenticated"}`, 401, "Not authenticated", worldmodel.ErrRejected},
		{"html page", "<html><body>bad gateway</body></html>\n", 502, `"<html><body>bad gateway</body></html>"`, worldmodel.ErrUnavailable},
		{"empty", "", 503, "503 Service Unavailable", worldmodel.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var auth, ctype atomic.Value
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				auth.Store(r.Header.Get("Authorization"))
				ctype.Store(r.Header.Get("Content-Type"))
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c := worldmodel.New(srv.URL+"/v1", "m", &worldmodel.Options{APIKey: "sk-test", MaxRetries: -1})
			_, err := c.Complete(context.Background(), worldmodel.Request{Messages: []worldmodel.Message{{Role: "user", Content: "hi"}}})
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), fmt.Sprintf("HTTP %d", tc.status)) {
				t.Fatalf("err = %v, want %v naming HTTP %d and %q", err, tc.wantErr, tc.status, tc.want)
			}
			if auth.Load() != "Bearer sk-test" || ctype.Load() != "application/json" {
				t.Fatalf("headers: Authorization %q, Content-Type %q", auth.Load(), ctype.Load())
			}
		})
	}
}

// TestClientHonoursRetryAfter checks that a server's requested pause is
// waited instead of the (here much shorter) backoff, and that one asking for
// more than a minute ends the retries with its answer.
func TestClientHonoursRetryAfter(t *testing.T) {
	cases := []struct {
		name, header, value string
		minWait             time.Duration
		wantRequests        int
	}{
		{"milliseconds", "Retry-After-Ms", "300", 300 * time.Millisecond, 2},
		{"seconds", "Retry-After", "1", time.Second, 2},
		{"too long", "Retry-After", "3600", 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					w.Header().Set(tc.header, tc.value)
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				w.Write([]byte(`{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`))
			}))
			defer srv.Close()
			c := worldmodel.New(srv.URL, "m", &worldmodel.Options{MaxRetryDelay: time.Millisecond})
			start := time.Now()
			resp, err := c.Complete(context.Background(), worldmodel.Request{})
			waited := time.Since(start)
			if got := int(n.Load()); got != tc.wantRequests {
				t.Fatalf("server saw %d requests, want %d (err %v)", got, tc.wantRequests, err)
			}
			if tc.wantRequests == 1 {
				if !errors.Is(err, worldmodel.ErrUnavailable) || !strings.Contains(err.Error(), "HTTP 429") {
					t.Fatalf("err = %v, want the 429", err)
				}
				return
			}
			if err != nil || resp.Attempts != 2 {
				t.Fatalf("Complete = %+v, %v", resp, err)
			}
			if waited < tc.minWait {
				t.Fatalf("retried after %s, before the %s the server asked for", waited, tc.minWait)
			}
		})
	}
}

// TestClientTimesOutASilentModel checks the per-attempt timeout against a
// server that never answers and one that stalls after its headers: each
// attempt is cut at the timeout, retried, and the error says so.
func TestClientTimesOutASilentModel(t *testing.T) {
	cases := []struct {
		name, want string
		headers    bool
	}{
		{"no answer", "attempt timed out after 100ms waiting for the answer", false},
		{"stalls after headers", "attempt timed out after 100ms reading the answer", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			quit := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				io.Copy(io.Discard, r.Body) // so the server notices the client hanging up
				if tc.headers {
					w.Write([]byte(`{"choices":`))
					w.(http.Flusher).Flush()
				}
				select {
				case <-r.Context().Done():
				case <-quit:
				}
			}))
			defer srv.Close()
			defer close(quit)
			c := worldmodel.New(srv.URL, "m", &worldmodel.Options{Timeout: 100 * time.Millisecond, MaxRetries: 2, MaxRetryDelay: time.Millisecond})
			_, err := c.Complete(context.Background(), worldmodel.Request{})
			if !errors.Is(err, worldmodel.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "after 3 attempts") {
				t.Fatalf("err = %v, want ErrUnavailable after 3 attempts: %s", err, tc.want)
			}
			if got := n.Load(); got != 3 {
				t.Fatalf("server saw %d requests, want 3", got)
			}
		})
	}
}

// TestClientRefusesAnswersOverTheCap streams a 300 MB answer and checks that
// it is refused at the default cap, once (no retry), with a clear error,
// while the heap stays near the cap rather than growing with the answer.
func TestClientRefusesAnswersOverTheCap(t *testing.T) {
	const answer = 300 << 20
	srv := fakellm.New(func(*fakellm.Request) fakellm.Reply { return fakellm.Reply{ContentBytes: answer} })
	defer srv.Close()
	c := worldmodel.New(srv.URL, "m", &worldmodel.Options{MaxRetryDelay: time.Millisecond})
	var err error
	grew := fakellm.HeapGrowth(func() { _, err = c.Complete(context.Background(), worldmodel.Request{}) })
	t.Logf("300 MiB answer: heap in use grew by at most %.1f MiB (cap %d MiB)", float64(grew)/(1<<20), worldmodel.DefaultMaxResponseBytes>>20)
	if !errors.Is(err, worldmodel.ErrResponseTooLarge) || !errors.Is(err, worldmodel.ErrUnavailable) || !strings.Contains(err.Error(), "16777216 bytes") {
		t.Fatalf("err = %v, want ErrResponseTooLarge naming the 16777216-byte cap", err)
	}
	if srv.Count() != 1 {
		t.Fatalf("server saw %d requests, want 1: an answer over the cap is not retried", srv.Count())
	}
	if limit := uint64(4 * worldmodel.DefaultMaxResponseBytes); grew > limit {
		t.Fatalf("heap in use grew by %d MiB reading a capped answer, want under %d MiB", grew>>20, limit>>20)
	}
}

// TestClientRefusesDeclaredOversizeUnread checks that an answer whose
// Content-Length is over the cap fails before its body is read.
func TestClientRefusesDeclaredOversizeUnread(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2048")
		w.Write(make([]byte, 2048))
	}))
	defer srv.Close()
	c := worldmodel.New(srv.URL, "m", &worldmodel.Options{MaxResponseBytes: 1024})
	_, err := c.Complete(context.Background(), worldmodel.Request{})
	if !errors.Is(err, worldmodel.ErrResponseTooLarge) || !strings.Contains(err.Error(), "1024 bytes") {
		t.Fatalf("err = %v, want ErrResponseTooLarge naming 1024 bytes", err)
	}
}

// TestClientSessionsSendTheirOwnHistory has two sessions step in turn
// through one client (each step encoded through its session's previous
// prefix) and checks that the server receives each session's whole
// history, unmixed, every time.
func TestClientSessionsSendTheirOwnHistory(t *testing.T) {
	srv := fakellm.New(func(*fakellm.Request) fakellm.Reply { return fakellm.Reply{Content: "ok"} })
	defer srv.Close()
	c := worldmodel.New(srv.URL, "m", nil)
	hist := map[string][]worldmodel.Message{
		"a": {{Role: "system", Content: "world A <rules>"}},
		"b": {{Role: "system", Content: "world B & more"}},
	}
	for turn := 1; turn <= 4; turn++ {
		for _, s := range []string{"a", "b"} {
			hist[s] = append(hist[s], worldmodel.Message{Role: "user", Content: fmt.Sprintf("%s action %d", s, turn)})
			ctx := worldmodel.WithAffinity(context.Background(), s)
			if _, err := c.Complete(ctx, worldmodel.Request{Messages: hist[s], MaxTokens: 64}); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			got := reqs[len(reqs)-1].Messages
			want := make([]fakellm.Message, len(hist[s]))
			for i, m := range hist[s] {
				want[i] = fakellm.Message{Role: m.Role, Content: m.Content}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("session %s turn %d: messages received (-want +got):\n%s", s, turn, diff)
			}
			hist[s] = append(hist[s], worldmodel.Message{Role: "assistant", Content: fmt.Sprintf("%s observation %d", s, turn)})
		}
	}
}

// TestRequestHashPinned pins Request.Hash values: they key every response
// cache on disk (bench --cache, the reward and rejection caches), so a
// change to how a request is hashed, however well meant (hashing the bytes
// the client sends, a field added to Request), turns every existing cache
// into misses. A new field must keep these hashes (omitempty at its zero
// value).
func TestRequestHashPinned(t *testing.T) {
	temp, topP, seed := 0.6, 0.95, int64(7)
	msgs := []worldmodel.Message{
		{Role: "system", Content: "You simulate <a terminal> & answer \"exactly\".\n"},
		{Role: "user", Content: "ls -la\u2028é"},
	}
	got := map[string]string{
		"bare":           worldmodel.Request{Messages: msgs}.Hash("wm"),
		"model set":      worldmodel.Request{Model: "wm", Messages: msgs}.Hash("other"),
		"no messages":    worldmodel.Request{}.Hash(""),
		"parameters":     worldmodel.Request{Messages: msgs, MaxTokens: 4096, Temperature: &temp, TopP: &topP, Seed: &seed}.Hash("wm"),
		"completion cap": worldmodel.Request{Messages: msgs, MaxTokens: 4096, MaxCompletionTokens: true}.Hash("wm"),
		"extra":          worldmodel.Request{Messages: msgs, Extra: map[string]any{"top_k": 20, "chat_template_kwargs": map[string]any{"enable_thinking": false}}}.Hash("wm"),
	}
	// "bare" is the SHA-256 of
	// {"model":"wm","messages":[{"role":"system","content":"You simulate \u003ca terminal\u003e \u0026 answer \"exactly\".\n"},{"role":"user","content":"ls -la\u2028é"}]}
	// and "no messages" of {"messages":null} (checked with sha256sum):
	// encoding/json's Marshal with its HTML escaping, not the request body.
	want := map[string]string{
		"bare":           "02a4873a8439e2be2a9a3cbcce80cc3d349ae462bfb8bef1fbebf43081b9c77a",
		"model set":      "02a4873a8439e2be2a9a3cbcce80cc3d349ae462bfb8bef1fbebf43081b9c77a",
		"no messages":    "dc62ef799f09a57f1781c39bc12750342dd245556017b682b987ed3e16cf4c90",
		"parameters":     "69b99ff312459d2315f335cc88e200a8b8582bf7ff3d93922186af85d1d10d56",
		"completion cap": "abec9f5785788fd2ab00bb5e649108bc5ee93a17544f01c5371358f396edf82f",
		"extra":          "2b13c9abbe20273a6079551c1f0dd19b8fd92637de4364fe42d81070c2097f24",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("request hashes changed (-pinned +now); existing caches would miss:\n%s", d)
	}
}
