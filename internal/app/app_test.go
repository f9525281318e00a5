package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/sim"
)

func TestModelURLNeedsModelName(t *testing.T) {
	_, err := New(context.Background(), Config{Model: "http://127.0.0.1:1/v1"})
	wantConfigField(t, err, "ModelName")
}

// tokenizingModel is a fake vLLM: chat completions whose observations are
// long in bytes but one word, and a /tokenize that counts words, so server
// counts and the byte estimate disagree by two orders of magnitude.
func tokenizingModel(t *testing.T, tokenize bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/tokenize":
			if !tokenize {
				http.NotFound(w, r)
				return
			}
			var req struct{ Prompt string }
			_ = json.NewDecoder(r.Body).Decode(&req)
			fmt.Fprintf(w, `{"count":%d,"max_model_len":40000,"tokens":[]}`, len(strings.Fields(req.Prompt)))
		case "/v1/chat/completions":
			obs := strings.Repeat("x", 8000)
			fmt.Fprintf(w, `{"choices":[{"message":{"content":"<predicted_observation>%s</predicted_observation>"},"finish_reason":"stop"}]}`, obs)
		case "/v1/models":
			w.Write([]byte(`{"data":[]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCountTokensWithServer checks CountTokens "server" end to end: the
// budget comes from the server's max_model_len, prompts are measured with
// its tokenizer (so a history that is long in bytes but short in tokens is
// not cut, where the estimate cuts it), and a server without /tokenize is
// refused at startup with a way out.
func TestCountTokensWithServer(t *testing.T) {
	steps := func(cfg Config) (string, []int) {
		app, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer app.Close(context.Background())
		ctx := context.Background()
		rep, err := app.Manager.Create(ctx, sim.CreateRequest{WorldID: "python-terminal"})
		if err != nil {
			t.Fatal(err)
		}
		var cuts []int
		for i := 1; i <= 6; i++ {
			r, err := app.Manager.Step(ctx, rep.SessionID, sim.StepRequest{Action: json.RawMessage(`"[{\"keystrokes\":\"ls\\n\",\"duration\":1}]"`)})
			if err != nil {
				t.Fatal(err)
			}
			cuts = append(cuts, r.Info.HistoryCut)
		}
		return app.Describe, cuts
	}
	srv := tokenizingModel(t, true)
	base := Config{Model: srv.URL + "/v1", ModelName: "wm", MaxTokens: 32000}
	cfg := base
	cfg.CountTokens = "server"
	desc, cuts := steps(cfg)
	if !strings.Contains(desc, "context 40000") {
		t.Errorf("describe %q does not report the server's context", desc)
	}
	if cuts[len(cuts)-1] != 0 {
		t.Errorf("server counting: history cuts %v, want none (each turn is a few dozen tokens of an 8000-token budget)", cuts)
	}
	cfg = base
	cfg.ContextBudget = 40000
	if _, cuts := steps(cfg); cuts[len(cuts)-1] == 0 {
		t.Errorf("estimated counting: history cuts %v, want a cut (each turn is ~2000 estimated tokens of 8000)", cuts)
	}
	cfg = base
	cfg.Model = tokenizingModel(t, false).URL + "/v1"
	cfg.CountTokens = "server"
	_, err := New(context.Background(), cfg)
	wantConfigField(t, err, "CountTokens")
	if !strings.Contains(err.Error(), "count with estimate") {
		t.Fatalf("server without /tokenize: err = %v, want a refusal naming the way out", err)
	}
}

// wantConfigField checks that err is a configuration error naming field.
func wantConfigField(t *testing.T, err error, field string) {
	t.Helper()
	fe, ok := fielderr.As(err)
	if !ok || fe.Path != field || !errors.Is(err, ErrConfig) {
		t.Fatalf("got %v, want a configuration error naming %s", err, field)
	}
}
