package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// TestPerturbationPatternsCannotPinACore is the CPU attack the red team
// of issue 21 left open: `.{0,1000}x` passes the memory bound, and one
// match against a 1 MiB action took 18 s, for every rule that carried it,
// on every step. An inline spec carrying it is refused at create, and a
// session's params.perturbations carrying it at its first step, naming
// the rule's field, before anything is matched or the model called. A
// spec of real rules still steps with a 1 MiB action.
func TestPerturbationPatternsCannotPinACore(t *testing.T) {
	model := fakellm.New(func(*fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: `<predicted_observation>{"ok": true}</predicted_observation>`}
	})
	t.Cleanup(model.Close)
	_, s := newAppServer(t, app.Config{Model: model.URL, ModelName: "wm"}, nil)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	type reply struct {
		SessionID string `json:"session_id"`
		Error     struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"error"`
	}
	do := func(path string, body any) (int, reply) {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := srv.Client().Post(srv.URL+path, "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r reply
		_ = json.NewDecoder(resp.Body).Decode(&r)
		return resp.StatusCode, r
	}
	rules := func(patterns ...string) map[string]any {
		var rs []any
		for _, p := range patterns {
			rs = append(rs, map[string]any{"when": map[string]any{"action": p}, "inject": map[string]any{"kind": "timeout"}})
		}
		return map[string]any{"rules": rs}
	}
	spec := func(p map[string]any) map[string]any {
		w := map[string]any{
			"name": "cpu", "domain": "mcp", "task_description": "answer", "initial_state": "ready",
			"action_space": map[string]any{"tools": []any{map[string]any{"name": "get", "input_schema": map[string]any{"type": "object"}}}},
		}
		if p != nil {
			w["perturbations"] = p
		}
		return w
	}
	attack := rules(`.{0,1000}x`, `.{0,1000}x`, `.{0,1000}x`, `.{0,1000}x`)

	code, r := do("/v1/sessions", map[string]any{"world": spec(attack)})
	if code != http.StatusBadRequest || r.Error.Field != "world.perturbations.rules[0].when.action" || !strings.Contains(r.Error.Message, "instructions") {
		t.Fatalf("inline spec with the attack: %d %+v", code, r)
	}
	before := model.Count()

	code, r = do("/v1/sessions", map[string]any{"world": spec(nil), "params": map[string]any{"perturbations": attack}})
	if code != http.StatusCreated {
		t.Fatalf("create: %d %+v", code, r)
	}
	step := func(id, args string) (int, reply) {
		return do("/step", map[string]any{"session_id": id, "action": map[string]any{"type": "call_tool", "tool_name": "get", "arguments": map[string]any{"q": args}}})
	}
	code, sr := step(r.SessionID, strings.Repeat("a", 1<<20-1024))
	if code != http.StatusBadRequest || !strings.HasPrefix(sr.Error.Field, "params.perturbations") || !strings.HasSuffix(sr.Error.Field, "rules[0].when.action") {
		t.Fatalf("step under an override with the attack: %d %+v", code, sr)
	}
	if n := model.Count(); n != before {
		t.Fatalf("the model was called %d times for refused work", n-before)
	}

	code, r = do("/v1/sessions", map[string]any{"world": spec(rules(`"LL-13"`, `(?i)\b(?:delete|drop|rm -rf)\b`))})
	if code != http.StatusCreated {
		t.Fatalf("real rules: %d %+v", code, r)
	}
	if code, sr = step(r.SessionID, strings.Repeat("a", 1<<20-1024)); code != http.StatusOK {
		t.Fatalf("a 1 MiB step under real rules: %d %+v", code, sr)
	}
}
