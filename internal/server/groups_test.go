package server

import (
	"strings"

	"fmt"
	"github.com/agentworld/agentworld/internal/sim"
	"net/http"
	"sync"
	"testing"

	"github.com/agentworld/agentworld/internal/api"
)

// TestResetGroupKeyForksOneRoot: resets carrying one group_key (here 8 at
// once, as a trainer resets a GRPO group) are forks of one cached root:
// same parent, same initial observation, distinct sessions; another key
// or another seed gets another root; a group_key with episode_id is
// refused.
func TestResetGroupKeyForksOneRoot(t *testing.T) {
	h := newHarness(t, "", nil)
	reset := func(body string) (api.OpenEnvResult, int) {
		var r api.OpenEnvResult
		code := h.do(http.MethodPost, "/reset", body, &r)
		return r, code
	}
	parent := func(r api.OpenEnvResult) string { s, _ := r.Metadata["parent"].(string); return s }
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		got  []api.OpenEnvResult
		errs []string
	)
	for range 8 {
		wg.Go(func() {
			r, code := reset(`{"world_id":"term","group_key":"g1","seed":7}`)
			mu.Lock()
			defer mu.Unlock()
			if code != http.StatusOK {
				errs = append(errs, fmt.Sprint(code))
			}
			got = append(got, r)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("resets failed: %v", errs)
	}
	root := parent(got[0])
	seen := map[string]bool{}
	for i, r := range got {
		if parent(r) == "" || parent(r) != root || r.Observation.Text != got[0].Observation.Text || seen[r.Observation.SessionID] || r.Observation.SessionID == root {
			t.Errorf("reset %d: session %q parent %q (root %q) observation %q", i, r.Observation.SessionID, parent(r), root, r.Observation.Text)
		}
		seen[r.Observation.SessionID] = true
	}
	for _, body := range []string{`{"world_id":"term","group_key":"g2","seed":7}`, `{"world_id":"term","group_key":"g1","seed":8}`} {
		r, code := reset(body)
		if code != http.StatusOK || parent(r) == "" || parent(r) == root {
			t.Errorf("%s: code %d parent %q, want a root other than %q", body, code, parent(r), root)
		}
	}
	var e struct {
		Error struct {
			Field string `json:"field"`
		} `json:"error"`
	}
	if code := h.do(http.MethodPost, "/reset", `{"world_id":"term","group_key":"g1","episode_id":"ep1"}`, &e); code != http.StatusBadRequest {
		t.Errorf("group_key with episode_id: %d %+v", code, e)
	}
	// A closed root (deleted, or expired by the idle reaper) still forks:
	// the store keeps its history, so the group keeps its start.
	if err := h.m.DeletePrivate(t.Context(), groupRootID(t, h, "g1", sim.CreateRequest{WorldID: "term", Seed: new(int64(7))})); err != nil {
		t.Fatal(err)
	}
	r, code := reset(`{"world_id":"term","group_key":"g1","seed":7}`)
	if code != http.StatusOK || parent(r) != root || r.Observation.Text != got[0].Observation.Text {
		t.Errorf("after the root closed: code %d parent %q, want %q", code, parent(r), root)
	}
}

// groupRootID is the private root session of group key for resets asking
// for c, as only the server knows it.
func groupRootID(t *testing.T, h *harness, key string, c sim.CreateRequest) string {
	t.Helper()
	g := &h.s.groups
	g.mu.Lock()
	r := g.roots[groupCacheKey(key, c)]
	g.mu.Unlock()
	if r == nil {
		t.Fatalf("no root for group %q", key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.id
}

// TestGroupRootIsPrivate attacks a reset group as another client would:
// the parent a member is told of names no session, and even a client that
// learnt the root's real id (here read from the server's memory) cannot
// step, fork, read or close it on any route. The next member of the group
// still starts from the world's initial state, and its first step sends
// the model nothing the attacker planted.
func TestGroupRootIsPrivate(t *testing.T) {
	h := newHarness(t, "", nil)
	const reset = `{"world_id":"term","group_key":"grp","seed":3}`
	var a api.OpenEnvResult
	if code := h.do(http.MethodPost, "/reset", reset, &a); code != http.StatusOK {
		t.Fatalf("reset: %d", code)
	}
	parent, _ := a.Metadata["parent"].(string)
	if !strings.HasPrefix(parent, "private:") {
		t.Fatalf("a member's parent is %q, want the private root's digest", parent)
	}
	root := groupRootID(t, h, "grp", sim.CreateRequest{WorldID: "term", Seed: new(int64(3))})
	if parent == root || strings.Contains(parent, strings.TrimPrefix(root, "s_")) {
		t.Fatalf("the member's parent %q discloses the root %q", parent, root)
	}
	const planted = "PLANTED-BY-ANOTHER-CLIENT"
	step := `{"action": [{"keystrokes": "echo ` + planted + `\n", "duration": 1}]}`
	for _, id := range []string{parent, root} {
		for _, a := range []struct{ method, path, body string }{
			{http.MethodPost, "/step", `{"session_id":"` + id + `","action":{"action":"[{\"keystrokes\":\"echo ` + planted + `\\n\"}]"}}`},
			{http.MethodPost, "/v1/sessions/" + id + "/step", step},
			{http.MethodPost, "/v1/sessions/" + id + "/fork", `{}`},
			{http.MethodGet, "/v1/sessions/" + id, ""},
			{http.MethodGet, "/state?session_id=" + id, ""},
			{http.MethodDelete, "/v1/sessions/" + id, ""},
		} {
			var body any
			if a.body != "" {
				body = a.body
			}
			if code := h.do(a.method, a.path, body, nil); code != http.StatusNotFound {
				t.Errorf("%s %s on the group's root: %d, want 404 (no such session)", a.method, a.path, code)
			}
		}
	}
	if len(h.model.Requests()) != 0 {
		t.Fatalf("the model was asked to step: %v", h.model.Requests())
	}
	// The member's own session is the member's to step.
	if code := h.do(http.MethodPost, "/v1/sessions/"+a.Observation.SessionID+"/step", step, nil); code != http.StatusOK {
		t.Fatalf("member step: %d", code)
	}
	var b api.OpenEnvResult
	if code := h.do(http.MethodPost, "/reset", reset, &b); code != http.StatusOK {
		t.Fatalf("second reset: %d", code)
	}
	if p, _ := b.Metadata["parent"].(string); p != parent || b.Observation.Text != a.Observation.Text {
		t.Fatalf("second member: parent %q observation %q, want %q and %q", p, b.Observation.Text, parent, a.Observation.Text)
	}
	var st struct {
		StepCount int `json:"step_count"`
	}
	if code := h.do(http.MethodGet, "/state?session_id="+b.Observation.SessionID, nil, &st); code != http.StatusOK || st.StepCount != 0 {
		t.Fatalf("second member's state: %d, %d steps, want a fresh start", code, st.StepCount)
	}
	if code := h.do(http.MethodPost, "/v1/sessions/"+b.Observation.SessionID+"/step", `{"action": [{"keystrokes": "ls\n", "duration": 1}]}`, nil); code != http.StatusOK {
		t.Fatalf("second member's step: %d", code)
	}
	reqs := h.model.Requests()
	last := reqs[len(reqs)-1]
	for _, m := range last {
		if strings.Contains(m.Content, planted) {
			t.Fatalf("the second member's first step carries another session's action: %q", m.Content)
		}
	}
	if n := len(last); n != 2 {
		t.Errorf("the second member's first step sent %d messages, want system + one user message", n)
	}
}
