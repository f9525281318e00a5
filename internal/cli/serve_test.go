package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// TestServeOffersNoRealBackendByDefault starts serve's app with no flags:
// every way a client could ask for a real environment (the backend field,
// an inline spec naming a real backend, shadow: real) is refused with a
// 400 naming the field and the flag that would turn it on, before any
// sandbox or process starts.
func TestServeOffersNoRealBackendByDefault(t *testing.T) {
	app, srv := startTestServe(t, nil)

	inlineTerminal := map[string]any{"name": "shell", "domain": "terminal", "task_description": "a shell",
		"action_space": map[string]any{"description": "keystrokes"}, "backend": "real:terminal"}
	for _, tc := range []struct {
		name       string
		body       map[string]any
		field, say string
	}{
		{"terminal backend", map[string]any{"world_id": "python-terminal", "backend": "real:terminal"}, "backend", "--real-tasks"},
		{"terminal with setup", map[string]any{"world_id": "python-terminal", "backend": "real:terminal", "params": map[string]any{"real": map[string]any{"setup": "id"}}}, "backend", "--real-tasks"},
		{"mcp backend", map[string]any{"world_id": "issue-tracker-mcp", "backend": "real:mcp"}, "backend", "--real-mcp"},
		{"inline spec on a real backend", map[string]any{"world": inlineTerminal}, "backend", "--real-tasks"},
		{"shadow real terminal", map[string]any{"world_id": "python-terminal", "shadow": "real"}, "shadow", "--real-tasks"},
		{"shadow real mcp", map[string]any{"world_id": "issue-tracker-mcp", "shadow": "real"}, "shadow", "--real-mcp"},
		// params.real on the simulator would be ignored: it is refused.
		{"real server on the simulator", map[string]any{"world_id": "issue-tracker-mcp", "params": map[string]any{"real": map[string]any{"server": "memory"}}}, "params.real.server", `"backend": "real:mcp"`},
		{"real task on the simulator", map[string]any{"world_id": "python-terminal", "params": map[string]any{"real": map[string]any{"task": "hello-file"}}}, "params.real.task", `"backend": "real:terminal"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := json.Marshal(tc.body)
			resp, err := http.Post(srv.URL+"/v1/sessions", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct {
				Error struct{ Message, Field string }
			}
			_ = json.Unmarshal(raw, &e)
			if resp.StatusCode != http.StatusBadRequest || e.Error.Field != tc.field || !strings.Contains(e.Error.Message, tc.say) {
				t.Fatalf("status %d, body %s; want 400 naming field %s and %s", resp.StatusCode, raw, tc.field, tc.say)
			}
		})
	}
	if n := app.Manager.Len(); n != 0 {
		t.Fatalf("%d sessions left open by refused creates", n)
	}
	// The simulated world itself still serves.
	resp, err := http.Post(srv.URL+"/v1/sessions", "application/json", strings.NewReader(`{"world_id":"python-terminal"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("simulated session: %d", resp.StatusCode)
	}
}

// startTestServe builds serve's app from its flags' defaults, adjusted by
// configure (nil keeps them; sessions are kept in memory), and serves it
// on a loopback server closed with the test.
func startTestServe(t *testing.T, configure func(*simFlags)) (*simulator, *httptest.Server) {
	t.Helper()
	var f simFlags
	cmd := &cobra.Command{}
	f.register(cmd)
	f.noDB = true
	if configure != nil {
		configure(&f)
	}
	s, err := f.serve(cmd)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Server.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close app: %v", err)
		}
	})
	return s, srv
}

// serveTestModelTimeout is the model timeout TestServeBoundsTheWorldModel
// serves with: long beside a loopback request on a loaded machine, short
// beside the silent model's minute.
const serveTestModelTimeout = 3 * time.Second

// TestServeBoundsTheWorldModel runs serve's app with --model-timeout and
// --model-max-response-bytes against a model that goes silent, and one that
// answers more than the cap: the step fails with 503 within the bounds
// (every silent attempt cut at the timeout and retried; the huge answer
// refused unread past the cap, not retried).
func TestServeBoundsTheWorldModel(t *testing.T) {
	var flags simFlags
	cmd := &cobra.Command{}
	flags.register(cmd)
	if err := cmd.ParseFlags([]string{"--model-timeout", "100ms", "--model-max-response-bytes", "65536"}); err != nil {
		t.Fatal(err)
	}
	if flags.cfg.ModelTimeout != 100*time.Millisecond || flags.cfg.ModelMaxResponseBytes != 65536 {
		t.Fatalf("flags parsed into timeout %s, cap %d", flags.cfg.ModelTimeout, flags.cfg.ModelMaxResponseBytes)
	}
	for _, tc := range []struct {
		name         string
		fail         fakellm.Reply
		wantRequests int
	}{
		{"silent", fakellm.Reply{Delay: time.Minute}, 3}, // the first attempt and serve's 2 retries, each cut at the timeout
		{"huge", fakellm.Reply{ContentBytes: 64 << 20}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var failing atomic.Bool
			model := fakellm.New(func(*fakellm.Request) fakellm.Reply {
				if failing.Load() {
					return tc.fail
				}
				return fakellm.Reply{Content: "<predicted_observation>$ </predicted_observation>"}
			})
			defer model.Close()
			_, srv := startTestServe(t, func(f *simFlags) {
				f.cfg.Model, f.cfg.ModelName = model.URL, "wm"
				// The run's timeout is the parsed flag's kind but longer:
				// 100 ms could cut a healthy answer (or a request before
				// the server has read it) on a loaded machine.
				f.cfg.ModelTimeout, f.cfg.ModelMaxResponseBytes = serveTestModelTimeout, flags.cfg.ModelMaxResponseBytes
			})
			var created struct {
				SessionID string `json:"session_id"`
			}
			if code := postJSON(t, srv.URL+"/v1/sessions", map[string]any{"world_id": "python-terminal"}, &created); code != http.StatusCreated {
				t.Fatalf("create: %d", code)
			}
			failing.Store(true)
			model.Reset()
			start := time.Now()
			step := map[string]any{"action": []map[string]any{{"keystrokes": "ls\n", "duration": 1}}}
			code := postJSON(t, srv.URL+"/v1/sessions/"+created.SessionID+"/step", step, nil)
			// Without the timeout the silent model would answer after a
			// minute (200), and the default timeout is ten: the 503 says
			// the flag's timeout cut it.
			if code != http.StatusServiceUnavailable || model.Count() != tc.wantRequests {
				t.Fatalf("step: %d after %d model requests in %s, want 503 after %d", code, model.Count(), time.Since(start), tc.wantRequests)
			}
		})
	}
}

// TestPlayServerStepTimeout: play --server gives up on a server that
// never answers after --step-timeout, instead of waiting forever.
func TestPlayServerStepTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so the server notices the client hang up
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: Close waits for handlers
	root := New()
	var stdout, stderr bytes.Buffer
	root.SetIn(strings.NewReader("ls\n"))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"play", "--server", srv.URL, "--step-timeout", "300ms", "python-terminal"})
	// The server never answers: only the step timeout (the client's
	// Client.Timeout) ends the command before this hang guard.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	err := root.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "open world python-terminal") || !strings.Contains(err.Error(), "Client.Timeout exceeded") || ctx.Err() != nil {
		t.Fatalf("after %v: %v\n%s", time.Since(start), err, stderr.String())
	}
}

// TestInMemoryCommandsShowNoDefaultDB: play and rollout keep sessions in
// memory unless --db is given, so their help shows no default database
// file; serve's shows the one it opens.
func TestInMemoryCommandsShowNoDefaultDB(t *testing.T) {
	for _, c := range []struct {
		cmd    string
		memory bool
	}{{"play", true}, {"rollout", true}, {"serve", false}} {
		out, _, err := runCLI(t, c.cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "--db string") {
				line = l
			}
		}
		if shows := strings.Contains(line, app.DefaultDBPath()); shows == c.memory || c.memory != strings.Contains(line, "kept in memory") {
			t.Errorf("%s --help: %q", c.cmd, line)
		}
	}
}

// TestServeReplayMinSimilarity: by default the embedded replay answers an
// action far from every recording with the unrecorded-action observation;
// --replay-min-similarity -1 brings back the nearest recording however
// far, marked approximate.
func TestServeReplayMinSimilarity(t *testing.T) {
	for _, tc := range []struct {
		min        float64
		unrecorded bool
	}{{0, true}, {-1, false}} {
		_, srv := startTestServe(t, func(f *simFlags) { f.cfg.ReplayMinSimilarity = tc.min })
		var created struct {
			SessionID string `json:"session_id"`
		}
		if code := postJSON(t, srv.URL+"/v1/sessions", map[string]any{"world_id": "python-terminal"}, &created); code != 201 {
			t.Fatalf("create: %d", code)
		}
		var step struct {
			Observation string
			Info        struct {
				Approximate bool
				Error       string
			}
		}
		if code := postJSON(t, srv.URL+"/v1/sessions/"+created.SessionID+"/step", map[string]any{"action": `[{"keystrokes":"echo step1\n","duration":0.5}]`}, &step); code != 200 {
			t.Fatalf("step: %d", code)
		}
		if got := strings.HasPrefix(step.Observation, "[replay: unrecorded action]"); got != tc.unrecorded || !step.Info.Approximate {
			t.Errorf("--replay-min-similarity %v: %+v", tc.min, step)
		}
	}
}
