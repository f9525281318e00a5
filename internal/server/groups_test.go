package server

import (
	"fmt"
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
	h.m.Delete(t.Context(), root)
	r, code := reset(`{"world_id":"term","group_key":"g1","seed":7}`)
	if code != http.StatusOK || parent(r) != root || r.Observation.Text != got[0].Observation.Text {
		t.Errorf("after the root closed: code %d parent %q, want %q", code, parent(r), root)
	}
}
