package server

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
)

func TestBadInputNamesTheField(t *testing.T) {
	h := newHarness(t, "", &Options{MaxBodyBytes: 4096})
	var created sim.Reply
	if st := h.do("POST", "/v1/sessions", `{"world_id":"term"}`, &created); st != 201 {
		t.Fatalf("create: %d", st)
	}
	id := created.SessionID
	big := `{"action": "` + strings.Repeat("x", 5000) + `"}`
	cases := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"unknown domain", "POST", "/v1/sessions", `{"world": {"domain": "spreadsheet", "task_description": "t", "action_space": "a"}}`, 400, "world.domain"},
		{"spec missing task", "POST", "/v1/sessions", `{"world": {"domain": "terminal", "action_space": "a"}}`, 400, "world.task_description"},
		{"spec missing action space", "POST", "/v1/sessions", `{"world": {"domain": "mcp", "task_description": "t"}}`, 400, "world.action_space"},
		{"spec unknown field", "POST", "/v1/sessions", `{"world": {"domain": "mcp", "task_description": "t", "action_space": "a", "colour": 1}}`, 400, "world.colour"},
		{"no world", "POST", "/v1/sessions", `{}`, 400, "world"},
		{"unknown world", "POST", "/v1/sessions", `{"world_id": "atlantis"}`, 404, "world_id"},
		{"unknown request field", "POST", "/v1/sessions", `{"world_id": "term", "wrold": 1}`, 400, "wrold"},
		{"wrong type", "POST", "/v1/sessions", `{"world_id": 5}`, 400, "world_id"},
		{"unknown backend", "POST", "/v1/sessions", `{"world_id": "term", "backend": "real:quantum"}`, 400, "backend"},
		{"terminal action not JSON", "POST", "/v1/sessions/" + id + "/step", `{"action": "ls -la"}`, 400, "action"},
		{"terminal action not an array", "POST", "/v1/sessions/" + id + "/step", `{"action": {"keystrokes": "ls\n"}}`, 400, "action"},
		{"terminal keystrokes missing", "POST", "/v1/sessions/" + id + "/step", `{"action": [{"keys": "ls\n"}]}`, 400, "action[0].keystrokes"},
		{"terminal duration not a number", "POST", "/v1/sessions/" + id + "/step", `{"action": [{"keystrokes": "ls\n", "duration": "1s"}]}`, 400, "action[0].duration"},
		{"missing action", "POST", "/v1/sessions/" + id + "/step", `{}`, 400, "action"},
		{"turn out of order", "POST", "/v1/sessions/" + id + "/step", `{"action": [], "turn": 5}`, 409, "turn"},
		{"unknown session", "POST", "/v1/sessions/s_nope/step", `{"action": []}`, 404, "session_id"},
		{"unknown session get", "GET", "/v1/sessions/s_nope", ``, 404, "session_id"},
		{"oversized body", "POST", "/v1/sessions/" + id + "/step", big, 413, "body"},
		{"malformed JSON", "POST", "/v1/sessions", `{"world_id": `, 400, "body"},
		{"openenv step without reset", "POST", "/step", `{"action": {"action": "[]"}}`, 400, "session_id"},
		{"openenv episode_id unusable as a session id", "POST", "/reset", `{"episode_id": "a/../b"}`, 400, "session_id"},
		{"openenv extra field of the wrong kind of body", "POST", "/reset", `[1]`, 400, "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e api.ErrorBody
			st := h.do(c.method, c.path, c.body, &e)
			if st != c.status || e.Error.Field != c.field {
				t.Fatalf("status %d field %q (%s), want %d %q", st, e.Error.Field, e.Error.Message, c.status, c.field)
			}
			if !strings.Contains(e.Error.Message, c.field) {
				t.Errorf("message %q does not name %q", e.Error.Message, c.field)
			}
		})
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Errorf("bad input reached the model %d times", n)
	}
}

func TestModelDownIs503WithRetryAfter(t *testing.T) {
	h := newHarness(t, "", nil)
	var created sim.Reply
	h.do("POST", "/v1/sessions", `{"world_id":"term"}`, &created)
	h.model.SetDown(true)
	req, _ := http.NewRequest("POST", h.srv.URL+"/v1/sessions/"+created.SessionID+"/step", strings.NewReader(`{"action": [{"keystrokes": "ls\n"}], "turn": 1}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("model down: status %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Nothing was recorded, so the same turn succeeds once the model is back.
	h.model.SetDown(false)
	var r sim.StepResult
	if st := h.do("POST", "/v1/sessions/"+created.SessionID+"/step", `{"action": [{"keystrokes": "ls\n"}], "turn": 1}`, &r); st != 200 || r.Info.Turn != 1 {
		t.Fatalf("after recovery: %d %+v", st, r)
	}
}

func TestAuthGuardsEverythingButHealth(t *testing.T) {
	h := newHarness(t, "", &Options{APIKey: "sekret"})
	h.key = ""
	if st := h.do("GET", "/health", nil, nil); st != 200 {
		t.Fatalf("health without token: %d", st)
	}
	for _, p := range []string{"/v1/worlds", "/metrics", "/schema", "/state"} {
		if st := h.do("GET", p, nil, nil); st != 401 {
			t.Errorf("%s without token: %d, want 401", p, st)
		}
	}
	h.key = "wrong"
	if st := h.do("GET", "/v1/worlds", nil, nil); st != 401 {
		t.Errorf("wrong token: %d", st)
	}
	h.key = "sekret"
	if st := h.do("GET", "/v1/worlds", nil, nil); st != 200 {
		t.Errorf("right token: %d", st)
	}
}

// TestRestartContinuesSession closes the server mid-episode and reopens
// the same database file: the session resumes with its whole history.
func TestRestartContinuesSession(t *testing.T) {
	db := filepath.Join(t.TempDir(), "s.db")
	h := newHarness(t, db, nil)
	var created sim.Reply
	h.do("POST", "/v1/sessions", `{"world_id":"term"}`, &created)
	id := created.SessionID
	for i, a := range []string{`[{"keystrokes":"ls\n"}]`, `[{"keystrokes":"cd src\n"}]`} {
		var r sim.StepResult
		if st := h.do("POST", "/v1/sessions/"+id+"/step", map[string]any{"action": a, "turn": i + 1}, &r); st != 200 {
			t.Fatalf("step %d: %d", i+1, st)
		}
	}
	before := h.model.Requests()
	h.srv.Close()
	if err := h.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	h.start(db, nil) // same fake model, fresh manager and server
	// A retry of turn 2 after the restart returns the stored result.
	var r2 sim.StepResult
	if st := h.do("POST", "/v1/sessions/"+id+"/step", map[string]any{"action": `[{"keystrokes":"cd src\n"}]`, "turn": 2}, &r2); st != 200 || r2.Observation != "obs 2 for ### Turn 2" {
		t.Fatalf("retried turn after restart: %d %+v", st, r2)
	}
	var r3 sim.StepResult
	if st := h.do("POST", "/v1/sessions/"+id+"/step", map[string]any{"action": `[{"keystrokes":"ls\n"}]`, "turn": 3}, &r3); st != 200 || r3.Info.Turn != 3 {
		t.Fatalf("step after restart: %d %+v", st, r3)
	}
	after := h.model.Requests()
	if len(after) != len(before)+1 {
		t.Fatalf("requests: %d before, %d after", len(before), len(after))
	}
	// The request after the restart extends the last one before it.
	prev, next := sim.RenderTranscript(before[len(before)-1]), sim.RenderTranscript(after[len(after)-1])
	if !strings.HasPrefix(string(next), string(prev)) {
		t.Fatalf("request after restart does not extend the one before:\n%s\n---\n%s", prev, next)
	}
	var tr trajectory.Trajectory
	h.do("GET", "/v1/sessions/"+id, nil, &tr)
	if len(tr.Turns) != 3 {
		t.Fatalf("trajectory after restart has %d turns", len(tr.Turns))
	}
}
