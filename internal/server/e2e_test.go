package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

const termSpec = `
name: term
domain: terminal
description: a shell in a small Python project
task_description: The agent works in /app, a Python project with a failing test.
action_space: JSON array of {"keystrokes", "duration"} objects sent to tmux.
initial_state: "root@box:/app# "
demonstrations:
  - action: '[{"keystrokes": "echo hi\n", "duration": 0.1}]'
    observation: "root@box:/app# echo hi\nhi\nroot@box:/app# "
`

type harness struct {
	t     *testing.T
	model *fakeModel
	m     *sim.Manager
	srv   *httptest.Server
	s     *Server // the server behind srv
	spec  *world.Spec
	key   string
	base  string // server URL when not srv (a server process)
	// store, when set, keeps the sessions instead of the dbPath start
	// is given.
	store sim.Store
}

func newHarness(t *testing.T, dbPath string, opts *Options) *harness {
	t.Helper()
	spec, err := world.Parse([]byte(termSpec), "term.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, model: newFakeModel(t), spec: spec}
	h.start(dbPath, opts)
	return h
}

func (h *harness) start(dbPath string, opts *Options) {
	t := h.t
	st := h.store
	if dbPath != "" {
		db, err := store.Open(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		st = db
	}
	client := worldmodel.New(h.model.URL(), "wm", &worldmodel.Options{MaxRetries: -1})
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	h.m = sim.New(&sim.Options{
		Store:    st,
		Worlds:   map[string]*world.Spec{"term": h.spec},
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(client, nil)},
		Observer: met,
	})
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Metrics = met
	o.Registry = reg
	h.key = o.APIKey
	h.s = New(h.m, &o)
	h.srv = httptest.NewServer(h.s.Handler())
	t.Cleanup(func() {
		h.srv.Close()
		_ = h.m.Close(context.Background())
	})
}

// do sends a JSON request and decodes the reply into out (when non-nil),
// returning the status.
func (h *harness) do(method, path string, body any, out any) int {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, _ := json.Marshal(b)
		rd = bytes.NewReader(js)
	}
	base := h.base
	if base == "" {
		base = h.srv.URL
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.key != "" {
		req.Header.Set("Authorization", "Bearer "+h.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			h.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

func msgs(pairs ...string) []worldmodel.Message {
	var out []worldmodel.Message
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, worldmodel.Message{Role: pairs[i], Content: pairs[i+1]})
	}
	return out
}

func TestEndToEndNativeOpenEnvWebSocketAndFork(t *testing.T) {
	h := newHarness(t, filepath.Join(t.TempDir(), "s.db"), nil)
	sys, err := sim.SystemPrompt(h.spec)
	if err != nil {
		t.Fatal(err)
	}

	// Native create and step.
	var created sim.Reply
	if st := h.do("POST", "/v1/sessions", map[string]any{"world_id": "term", "seed": 7}, &created); st != 201 {
		t.Fatalf("create: status %d", st)
	}
	if created.Observation != "root@box:/app# " || created.Info.Backend != "model" || created.Info.Source != "spec" {
		t.Fatalf("create reply: %+v", created)
	}
	id := created.SessionID
	var r1 sim.StepResult
	if st := h.do("POST", "/v1/sessions/"+id+"/step", `{"action": [{"keystrokes": "ls\n", "duration": 1}], "turn": 1}`, &r1); st != 200 {
		t.Fatalf("step 1: status %d", st)
	}
	if r1.Observation != "obs 1 for ### Turn 1" || r1.Info.Turn != 1 || r1.Info.Reasoning != "thinking 1" || r1.Info.PromptTokens != 100 || r1.Info.Backend != "model" || r1.Terminated {
		t.Fatalf("step 1 result: %+v", r1)
	}
	// A retried turn returns the stored result without a second simulation.
	var again sim.StepResult
	if st := h.do("POST", "/v1/sessions/"+id+"/step", `{"action": [{"duration": 1, "keystrokes": "ls\n"}], "turn": 1}`, &again); st != 200 {
		t.Fatalf("retry: status %d", st)
	}
	if diff := cmp.Diff(r1, again); diff != "" || len(h.model.Requests()) != 1 {
		t.Fatalf("retried step re-simulated (%d requests): %s", len(h.model.Requests()), diff)
	}

	// OpenEnv HTTP step on the same session.
	var oe api.OpenEnvResult
	if st := h.do("POST", "/step", map[string]any{"session_id": id, "action": map[string]any{"action": `[{"keystrokes":"pwd\n"}]`}}, &oe); st != 200 {
		t.Fatalf("openenv step: status %d", st)
	}
	if oe.Observation.Text != "obs 2 for ### Turn 2" || oe.Observation.Turn != 2 || oe.Done || oe.Reward == nil {
		t.Fatalf("openenv step: %+v", oe)
	}
	var state sim.State
	if st := h.do("GET", "/state?session_id="+id, nil, &state); st != 200 || state.StepCount != 2 || state.EpisodeID != id {
		t.Fatalf("openenv state: %d %+v", st, state)
	}

	// WebSocket: attach, step, state, close.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(h.srv.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	wsCall := func(typ string, data any) api.OpenEnvWSMessage {
		t.Helper()
		m := map[string]any{"type": typ}
		if data != nil {
			m["data"] = data
		}
		if err := wsjson.Write(ctx, c, m); err != nil {
			t.Fatal(err)
		}
		var out api.OpenEnvWSMessage
		if err := wsjson.Read(ctx, c, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	att := wsCall("reset", map[string]any{"session_id": id})
	var attRes api.OpenEnvResult
	_ = json.Unmarshal(att.Data, &attRes)
	if att.Type != "observation" || attRes.Observation.Text != "obs 2 for ### Turn 2" || attRes.Observation.Turn != 2 {
		t.Fatalf("ws attach: %s %s", att.Type, att.Data)
	}
	stepMsg := wsCall("step", map[string]any{"action": []any{map[string]any{"keystrokes": "cat setup.py\n", "duration": 0.5}}})
	var wsRes api.OpenEnvResult
	_ = json.Unmarshal(stepMsg.Data, &wsRes)
	if stepMsg.Type != "observation" || wsRes.Observation.Text != "obs 3 for ### Turn 3" {
		t.Fatalf("ws step: %s %s", stepMsg.Type, stepMsg.Data)
	}
	bad := wsCall("step", map[string]any{"action": "ls"})
	if bad.Type != "error" || !strings.Contains(string(bad.Data), "JSON array") {
		t.Fatalf("ws malformed action: %s %s", bad.Type, bad.Data)
	}
	stMsg := wsCall("state", nil)
	if stMsg.Type != "state" || !strings.Contains(string(stMsg.Data), `"step_count":3`) {
		t.Fatalf("ws state: %s %s", stMsg.Type, stMsg.Data)
	}
	if err := wsjson.Write(ctx, c, map[string]any{"type": "close"}); err != nil {
		t.Fatal(err)
	}
	c.CloseNow()

	// Fork, then step both branches.
	var fork sim.Reply
	if st := h.do("POST", "/v1/sessions/"+id+"/fork", `{"seed": 8}`, &fork); st != 201 {
		t.Fatalf("fork: status %d", st)
	}
	if fork.Info.Parent != id || fork.Info.Turn != 3 || fork.Observation != "obs 3 for ### Turn 3" {
		t.Fatalf("fork reply: %+v", fork)
	}
	var fr, pr sim.StepResult
	if st := h.do("POST", "/v1/sessions/"+fork.SessionID+"/step", `{"action": "[{\"keystrokes\":\"python -m pytest\\n\",\"duration\":5}]"}`, &fr); st != 200 {
		t.Fatalf("fork step: %d", st)
	}
	if st := h.do("POST", "/v1/sessions/"+id+"/step", `{"action": "[]"}`, &pr); st != 200 {
		t.Fatalf("parent end step: %d", st)
	}
	if !pr.Terminated || pr.Info.Backend != "rule" {
		t.Fatalf("[] should end a terminal episode without a model call: %+v", pr)
	}

	// The exact messages the backend received.
	a := func(n int) string {
		return "**Environment Observation:**\nobs " + string(rune('0'+n)) + " for ### Turn " + string(rune('0'+n))
	}
	u := func(turn int, action string) string { return conversation.UserMessage(turn, action, "", "") }
	u1 := u(1, `[{"duration":1,"keystrokes":"ls\n"}]`)
	u2 := u(2, `[{"keystrokes":"pwd\n"}]`)
	u3 := u(3, `[{"duration":0.5,"keystrokes":"cat setup.py\n"}]`)
	u4 := u(4, `[{"duration":5,"keystrokes":"python -m pytest\n"}]`)
	want := [][]worldmodel.Message{
		msgs("system", sys, "user", u1),
		msgs("system", sys, "user", u1, "assistant", a(1), "user", u2),
		msgs("system", sys, "user", u1, "assistant", a(1), "user", u2, "assistant", a(2), "user", u3),
		msgs("system", sys, "user", u1, "assistant", a(1), "user", u2, "assistant", a(2), "user", u3, "assistant", a(3), "user", u4),
	}
	if diff := cmp.Diff(want, h.model.Requests()); diff != "" {
		t.Fatalf("backend requests (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(u1, "### Turn 1\n**Action:**\n[{\"duration\":1,\"keystrokes\":\"ls\\n\"}]\n\nPredict the environment's observation") {
		t.Fatalf("user message shape: %q", u1)
	}
	for _, want := range []string{"The agent works in /app", "root@box:/app# ", "echo hi", "<predicted_observation>", "tmux"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}

	// The recorded trajectories.
	var tr trajectory.Trajectory
	if st := h.do("GET", "/v1/sessions/"+id, nil, &tr); st != 200 {
		t.Fatalf("get: %d", st)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(tr.Turns) != 4 || tr.Domain != "terminal" || tr.SystemPrompt != sys || tr.Turns[3].Action != "[]" || tr.Turns[0].Observation != "obs 1 for ### Turn 1" {
		t.Fatalf("parent trajectory: %+v", tr)
	}
	var ftr trajectory.Trajectory
	h.do("GET", "/v1/sessions/"+fork.SessionID, nil, &ftr)
	if len(ftr.Turns) != 4 || ftr.Turns[3].Observation != "obs 4 for ### Turn 4" || string(ftr.Meta["parent"]) != `"`+id+`"` {
		t.Fatalf("fork trajectory: %+v", ftr)
	}
	// The ended parent refuses further steps; the fork can be deleted.
	if st := h.do("POST", "/v1/sessions/"+id+"/step", `{"action": "[]"}`, nil); st != 409 {
		t.Fatalf("step after end: %d, want 409", st)
	}
	if st := h.do("DELETE", "/v1/sessions/"+fork.SessionID, nil, nil); st != 200 {
		t.Fatalf("delete: %d", st)
	}
	if st := h.do("POST", "/v1/sessions/"+fork.SessionID+"/step", `{"action": "[]"}`, nil); st != 410 {
		t.Fatalf("step after delete: %d, want 410", st)
	}
}
