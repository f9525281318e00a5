package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/examples"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// TestEmbeddedDefaultServesEveryExampleWorld runs the zero configuration
// (what `agentworld serve` does with no flags): every bundled world opens,
// and each recording's first action replays exactly through the HTTP API.
func TestEmbeddedDefaultServesEveryExampleWorld(t *testing.T) {
	app, err := NewApp(AppConfig{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.Server.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = app.Manager.Close(context.Background())
		_ = app.Close()
	})
	h := &harness{t: t, srv: srv}
	if !strings.Contains(app.Describe, "embedded default") {
		t.Errorf("describe: %s", app.Describe)
	}
	entries, err := examples.FS.ReadDir("recordings")
	if err != nil {
		t.Fatal(err)
	}
	domains := map[string]bool{}
	for _, e := range entries {
		f, _ := examples.FS.Open("recordings/" + e.Name())
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		sc.Scan()
		f.Close()
		var tr trajectory.Trajectory
		if err := json.Unmarshal(sc.Bytes(), &tr); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		var w string
		_ = json.Unmarshal(tr.Meta["world"], &w)
		var rep sim.Reply
		if st := h.do("POST", "/v1/sessions", map[string]any{"world_id": w}, &rep); st != 201 {
			t.Fatalf("%s: create %d", w, st)
		}
		if rep.Info.Backend != "replay" {
			t.Errorf("%s: backend %s", w, rep.Info.Backend)
		}
		domains[rep.Info.Domain] = true
		var r sim.StepResult
		if st := h.do("POST", "/v1/sessions/"+rep.SessionID+"/step", map[string]any{"action": tr.Turns[0].Action}, &r); st != 200 {
			t.Fatalf("%s: step %d", w, st)
		}
		if r.Info.Backend != "replay" || r.Info.Approximate || r.Observation != tr.Turns[0].Observation {
			t.Errorf("%s: first recorded action not replayed exactly: %+v", w, r.Info)
		}
	}
	for _, d := range domain.All {
		if !domains[string(d)] {
			t.Errorf("no bundled world+recording for domain %s", d)
		}
	}
	// OpenEnv /reset with no world uses the default world.
	var oe OpenEnvResult
	if st := h.do("POST", "/reset", `{}`, &oe); st != 200 || oe.Observation.SessionID == "" {
		t.Fatalf("openenv reset: %d %+v", st, oe)
	}
	var schema map[string]any
	if st := h.do("GET", "/schema", nil, &schema); st != 200 || schema["action"] == nil || schema["observation"] == nil || schema["state"] == nil {
		t.Fatalf("schema: %d %v", st, schema)
	}
}

func TestPlayInProcess(t *testing.T) {
	app, err := NewApp(AppConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Manager.Close(context.Background())
	var out strings.Builder
	in := strings.NewReader("ls\npython -m pytest -q\n\n")
	if err := Play(context.Background(), managerAsPlayer{app.Manager}, "python-terminal", in, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"world python-terminal (terminal)", "turn 1 (replay", "1 failed, 4 passed", "episode over"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("play output lacks %q:\n%s", want, out.String())
		}
	}
}

type managerAsPlayer struct{ m *sim.Manager }

func (p managerAsPlayer) Create(ctx context.Context, r sim.CreateRequest) (*sim.Reply, error) {
	return p.m.Create(ctx, r)
}
func (p managerAsPlayer) Step(ctx context.Context, id string, r sim.StepRequest) (*sim.StepResult, error) {
	return p.m.Step(ctx, id, r)
}

func TestPlayAgainstServer(t *testing.T) {
	h := newHarness(t, "", &Options{APIKey: "k"})
	var out strings.Builder
	cl := &Client{BaseURL: h.srv.URL, APIKey: "k"}
	if err := Play(context.Background(), cl, "term", strings.NewReader("ls\n^C\n:q\n"), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"answered by model", "obs 1 for ### Turn 1", "turn 2 (model)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("play output lacks %q:\n%s", want, out.String())
		}
	}
	reqs := h.model.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1][len(reqs[1])-1].Content, `"keystrokes":"C-c"`) {
		t.Fatalf("typed lines became the wrong actions: %v", reqs)
	}
	if err := Play(context.Background(), &Client{BaseURL: h.srv.URL}, "term", strings.NewReader(""), &out); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("missing key: %v", err)
	}
}

func TestModelURLNeedsModelName(t *testing.T) {
	if _, err := NewApp(AppConfig{Model: "http://127.0.0.1:1/v1"}); err == nil || !strings.Contains(err.Error(), "--model-name") {
		t.Fatalf("got %v", err)
	}
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

// TestCountTokensWithServer checks --count-tokens server end to end: the
// budget comes from the server's max_model_len, prompts are measured with
// its tokenizer (so a history that is long in bytes but short in tokens is
// not cut, where the estimate cuts it), and a server without /tokenize is
// refused at startup with a way out.
func TestCountTokensWithServer(t *testing.T) {
	steps := func(cfg AppConfig) (string, []int) {
		app, err := NewApp(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = app.Manager.Close(context.Background()); _ = app.Close() }()
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
	base := AppConfig{Model: srv.URL + "/v1", ModelName: "wm", MaxTokens: 32000}
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
	if _, err := NewApp(cfg); err == nil || !strings.Contains(err.Error(), "--count-tokens estimate") {
		t.Fatalf("server without /tokenize: err = %v, want a refusal naming the way out", err)
	}
}
