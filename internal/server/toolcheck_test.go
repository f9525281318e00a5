package server

import (
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/sim"
)

// TestSessionAPIRefusesBadToolCallsWithoutAModelCall: a step naming a tool
// the world does not have, or arguments that break the tool's input
// schema, is answered as the facade (and a real MCP server) answers it —
// the SDK's unknown-tool error, the failed validation result — and never
// reaches the world model. A valid call does.
func TestSessionAPIRefusesBadToolCallsWithoutAModelCall(t *testing.T) {
	model := newFakeModel(t)
	_, s := newAppServer(t, app.Config{Model: model.URL(), ModelName: "wm"}, nil)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	h := &harness{t: t, srv: srv}
	var rep sim.Reply
	if st := h.do("POST", "/v1/sessions", map[string]any{"world_id": "issue-tracker-mcp"}, &rep); st != 201 {
		t.Fatalf("create %d", st)
	}
	cases := []struct {
		name, action, obs, label string
	}{
		{"unknown tool", `{"name": "delete_project", "arguments": {"project": "WS"}}`,
			`{"error":{"code":-32602,"message":"unknown tool \"delete_project\""}}`, "unknown_tool"},
		{"missing required", `{"name": "get_issue", "arguments": {}}`,
			`{"content":[{"type":"text","text":"MCP error -32602: Input validation error: Invalid arguments for tool get_issue: Invalid input: expected string, received undefined at key"}],"isError":true}`, "invalid_arguments"},
		{"wrong type", `{"name": "list_issues", "arguments": {"project": 7}}`,
			`{"content":[{"type":"text","text":"MCP error -32602: Input validation error: Invalid arguments for tool list_issues: Invalid input: expected string, received number at project"}],"isError":true}`, "invalid_arguments"},
	}
	for _, c := range cases {
		var r sim.StepResult
		if st := h.do("POST", "/v1/sessions/"+rep.SessionID+"/step", map[string]any{"action": c.action}, &r); st != 200 {
			t.Fatalf("%s: step %d", c.name, st)
		}
		if diff := cmp.Diff(c.obs, r.Observation); diff != "" {
			t.Errorf("%s: observation (-want +got):\n%s", c.name, diff)
		}
		if r.Info.Backend != "tool_check" || r.Info.Labels["tool_check"] != c.label {
			t.Errorf("%s: info %+v", c.name, r.Info)
		}
	}
	if n := len(model.Requests()); n != 0 {
		t.Fatalf("%d model calls for refused tool calls, want 0", n)
	}
	// The OpenEnv surface reads the refusal as OpenEnv's client would.
	var oe api.OpenEnvResult
	if st := h.do("POST", "/step", map[string]any{"session_id": rep.SessionID, "action": map[string]any{"tool_name": "nope", "arguments": map[string]any{}}}, &oe); st != 200 {
		t.Fatalf("openenv step %d", st)
	}
	if oe.Observation.Error == nil || oe.Observation.Error.Message != `unknown tool "nope"` {
		t.Errorf("openenv tool error %+v", oe.Observation.Error)
	}
	var r sim.StepResult
	if st := h.do("POST", "/v1/sessions/"+rep.SessionID+"/step", map[string]any{"action": `{"name": "get_issue", "arguments": {"key": "WS-1"}}`}, &r); st != 200 {
		t.Fatalf("valid step %d", st)
	}
	if r.Info.Backend != "model" || len(model.Requests()) != 1 {
		t.Errorf("a valid call: backend %s, %d model calls", r.Info.Backend, len(model.Requests()))
	}
}
