package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentworld/agentworld/examples"
	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/play"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// TestEmbeddedDefaultServesEveryExampleWorld runs the zero configuration
// (what `agentworld serve` does with no flags): every bundled world opens,
// and each recording's first action replays exactly through the HTTP API.
func TestEmbeddedDefaultServesEveryExampleWorld(t *testing.T) {
	a, s := newAppServer(t, app.Config{}, nil)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	h := &harness{t: t, srv: srv}
	if !strings.Contains(a.Describe, "embedded default") {
		t.Errorf("describe: %s", a.Describe)
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
	var oe api.OpenEnvResult
	if st := h.do("POST", "/reset", `{}`, &oe); st != 200 || oe.Observation.SessionID == "" {
		t.Fatalf("openenv reset: %d %+v", st, oe)
	}
	var schema map[string]any
	if st := h.do("GET", "/schema", nil, &schema); st != 200 || schema["action"] == nil || schema["observation"] == nil || schema["state"] == nil {
		t.Fatalf("schema: %d %v", st, schema)
	}
}

// newAppServer assembles the simulator as `agentworld serve` does (app.New
// with the server's metrics) and a Server over it with opts; the app is
// closed when the test ends.
func newAppServer(t testing.TB, cfg app.Config, opts *Options) (*app.App, *Server) {
	t.Helper()
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	cfg.Observer, cfg.Registry = met, reg
	a, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(context.Background()); err != nil {
			t.Errorf("close app: %v", err)
		}
	})
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Registry, o.Metrics, o.MCP = reg, met, a.MCP
	return a, New(a.Manager, &o)
}

func TestPlayAgainstServer(t *testing.T) {
	h := newHarness(t, "", &Options{APIKey: "k"})
	var out strings.Builder
	// The client play --server uses, against the real server.
	cl := play.Remote(&api.Client{BaseURL: h.srv.URL, APIKey: "k"}, nil)
	if err := play.Play(context.Background(), cl, "term", strings.NewReader("ls\n^C\n:q\n"), &out); err != nil {
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
	if err := play.Play(context.Background(), &api.Client{BaseURL: h.srv.URL}, "term", strings.NewReader(""), &out); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("missing key: %v", err)
	}
}

// TestManualNamesEveryBundledWorld: docs/simulator.md says how many worlds
// the embedded default loads, and it is how many ship.
func TestManualNamesEveryBundledWorld(t *testing.T) {
	a, _ := newAppServer(t, app.Config{}, nil)
	page, err := os.ReadFile("../../docs/simulator.md")
	if err != nil {
		t.Fatal(err)
	}
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	n := len(a.Manager.Worlds())
	if n >= len(words) || !strings.Contains(string(page), "the "+words[n]+" bundled example worlds") {
		t.Errorf("docs/simulator.md does not say \"the %d bundled example worlds\" in words", n)
	}
}
