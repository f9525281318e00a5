package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/world"
)

// Bounds of TestInlineCompiledStateIsBounded: SECURITY.md's promise
// (serve holds at most 256 MiB over its idle size under hostile inline
// specs), and what is left once their sessions are gone.
const (
	hostileHeapBound = 256 << 20
	releasedBound    = 32 << 20
)

// inlineMCPWorld is an inline MCP spec whose one tool has an output schema
// of n properties named after iter (so no two iterations share a schema)
// and whose perturbation rules have large (admitted) action patterns.
func inlineMCPWorld(iter, n int) map[string]any {
	props := make(map[string]any, n)
	for i := range n {
		props[fmt.Sprintf("p%d_%d", iter, i)] = map[string]any{"type": "string", "pattern": fmt.Sprintf("^[a-z]{1,%d}$", 3+i%50)}
	}
	var rules []map[string]any
	for i := range 6 {
		rules = append(rules, map[string]any{
			"name": fmt.Sprintf("r%d", i),
			// 168 instructions each, 1,008 in all: at perturb.MaxActionInsts.
			"when":   map[string]any{"action": fmt.Sprintf(`[\pL\pN]{160}|iter%d`, iter), "probability": 0},
			"inject": map[string]any{"kind": "timeout"},
		})
	}
	return map[string]any{
		"name": fmt.Sprintf("hostile-%d", iter), "domain": "mcp", "task_description": "answer",
		"action_space":  map[string]any{"tools": []any{map[string]any{"name": "get", "input_schema": map[string]any{"type": "object"}, "output_schema": map[string]any{"type": "object", "properties": props}}}},
		"initial_state": "ready",
		"perturbations": map[string]any{"rules": rules},
	}
}

// TestInlineCompiledStateIsBounded is the attack of issue 21 on serve's
// memory through what inline specs make it compile. The specs the issue
// sent (six 27 KB perturbation patterns; output schemas of a hundred
// thousand nodes) are refused, naming the field. Then a client creates,
// uses and deletes sessions of distinct specs at the bounds (six large
// patterns, an output schema of thousands of nodes checked on every
// call) in a loop: the heap in use after GC stays within 256 MiB of its
// idle size throughout, and comes back near it once the sessions are
// gone, since compiled schemas and perturbation engines are kept per
// spec and go with it.
func TestInlineCompiledStateIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("creates sessions with large inline specs")
	}
	model := fakellm.New(func(*fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: `<predicted_observation>{"p0_0": "abc"}</predicted_observation>`}
	})
	t.Cleanup(model.Close)
	_, s := newAppServer(t, app.Config{Model: model.URL, ModelName: "wm"}, nil)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	do := func(method, path string, body any, out any) int {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(string(b)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	type refusal struct {
		Error struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"error"`
	}

	// The specs.
	huge := inlineMCPWorld(0, 1)
	var rules []map[string]any
	for i := range 6 {
		rules = append(rules, map[string]any{"name": fmt.Sprintf("r%d", i), "when": map[string]any{"action": strings.Repeat(`\pL{1000}`, 3000)}, "inject": map[string]any{"kind": "timeout"}})
	}
	huge["perturbations"] = map[string]any{"rules": rules}
	var r refusal
	if code := do(http.MethodPost, "/v1/sessions", map[string]any{"world": huge}, &r); code != http.StatusBadRequest || r.Error.Field != "world.perturbations.rules[0].when.action" {
		t.Fatalf("six 27 KB patterns: %d %+v", code, r)
	}
	wide := inlineMCPWorld(0, 1)
	delete(wide, "perturbations")
	bare := map[string]any{}
	for i := range 80_000 {
		bare[fmt.Sprint(i)] = map[string]any{}
	}
	wide["action_space"] = map[string]any{"tools": []any{map[string]any{"name": "get", "output_schema": map[string]any{"type": "object", "properties": bare}}}}
	r = refusal{}
	if code := do(http.MethodPost, "/v1/sessions", map[string]any{"world": wide}, &r); code != http.StatusBadRequest || !strings.Contains(r.Error.Message, "over the limit") {
		t.Fatalf("a schema of 80,000 nodes: %d %+v", code, r)
	}

	idle := testkit.HeapAfterGC()
	peak := idle
	const nodes, rounds = 1000, 10
	if w := inlineMCPWorld(0, nodes); true {
		spec, err := world.Parse(must(json.Marshal(w)), "w")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("each spec: %d KiB estimated compiled", spec.CompiledBytes()>>10)
	}
	for i := range rounds {
		var created struct {
			SessionID string `json:"session_id"`
		}
		if code := do(http.MethodPost, "/v1/sessions", map[string]any{"world": inlineMCPWorld(i, nodes)}, &created); code != http.StatusCreated {
			t.Fatalf("round %d: create %d", i, code)
		}
		var res struct {
			Observation struct {
				Result map[string]any `json:"result"`
			} `json:"observation"`
		}
		step := map[string]any{"session_id": created.SessionID, "action": map[string]any{"type": "call_tool", "tool_name": "get", "arguments": map[string]any{}}}
		if code := do(http.MethodPost, "/step", step, &res); code != http.StatusOK || res.Observation.Result["structuredContent"] == nil {
			t.Fatalf("round %d: step %d %+v (the answer meets the schema, so it is checked and kept)", i, code, res)
		}
		if code := do(http.MethodDelete, "/v1/sessions/"+created.SessionID, nil, nil); code != http.StatusOK && code != http.StatusNoContent {
			t.Fatalf("round %d: delete %d", i, code)
		}
		peak = max(peak, testkit.HeapAfterGC())
	}
	t.Logf("heap in use after GC: idle %d MiB, peak %d MiB over %d rounds", idle>>20, peak>>20, rounds)
	if peak-idle > hostileHeapBound {
		t.Fatalf("the heap grew by %d MiB, over the bound of %d MiB", (peak-idle)>>20, hostileHeapBound>>20)
	}
	// Compiled state goes with its spec: collections run the cleanups
	// that drop it (polled, within a hang guard).
	deadline := time.Now().Add(time.Minute)
	for {
		left := testkit.HeapAfterGC() - idle
		if left <= releasedBound {
			t.Logf("after the sessions: %d MiB over idle", left>>20)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d MiB are still held after every session was deleted", left>>20)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
