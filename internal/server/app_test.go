package server

import (
	"bufio"
	"context"
	"encoding/json"
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
