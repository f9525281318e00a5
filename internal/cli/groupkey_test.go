package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// TestClusterSharesGroupsAndLedgers starts three nodes (embedded NATS
// each, as TestAnyNodeServesEverySurface does) and resets OpenEnv groups
// through all of them: nine resets of one group_key at once, three per
// node, and a group reset on node 0, then on the others, then (node 0
// killed with SIGKILL while idle) on the others again. Every member of a
// group has the same parent (one root for the whole cluster, also after
// its maker died) and initial observation, and the first steps of the
// second group's members ask the model one request each, all alike: no
// root was asked for, and no member's start differs. Before the kill, a
// fact a session of the fictional world quillfern-search establishes on
// node 1 reaches the prompt of a session stepped on node 2: one world
// ledger for the cluster.
func TestClusterSharesGroupsAndLedgers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var asked [][]fakellm.Message
	fake := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		mu.Lock()
		asked = append(asked, r.Messages)
		mu.Unlock()
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "session A") { // as TestFictionalWorldEndToEnd's
			return fakellm.Reply{Content: `<predicted_observation>{"results":[{"id":"emp-9","name":"Oona Pale","title":"Head of Optics"}]}</predicted_observation>`}
		}
		return fakellm.Reply{Content: "ok\n"}
	})
	t.Cleanup(fake.Close)
	nodes := startCluster(ctx, t, time.Second, func(int) ([]string, []string) { return []string{"--model", fake.URL}, nil })
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for i, n := range nodes { // what the last lines of the logs may not show
			b, _ := os.ReadFile(n.log)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "request failed") {
					t.Logf("node %d: %s", i, l)
				}
			}
		}
	})
	h := &http.Client{Timeout: 30 * time.Second}

	type member struct {
		node    int
		id      string
		parent  string
		initial string
	}
	reset := func(n int, group string) (member, error) {
		out, err := anyNodeDo(ctx, h, nodes[n], "POST", "/reset", map[string]any{"world_id": "python-terminal", "group_key": group})
		if err != nil {
			return member{}, err
		}
		var r struct {
			Observation struct {
				SessionID string `json:"session_id"`
				Text      string `json:"text"`
			} `json:"observation"`
			Metadata struct {
				Parent string `json:"parent"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return member{}, fmt.Errorf("reset on node %d: %s: %w", n, out, err)
		}
		return member{n, r.Observation.SessionID, r.Metadata.Parent, r.Observation.Text}, nil
	}
	check := func(group string, ms []member) {
		t.Helper()
		for i, m := range ms {
			if m.parent == "" || m.parent != ms[0].parent || m.initial != ms[0].initial || m.id == "" {
				t.Fatalf("group %s member %d (node %d): %+v; member 0 (node %d): %+v", group, i, m.node, m, ms[0].node, ms[0])
			}
		}
	}

	race := make([]member, 9)
	errs := make([]error, len(race))
	var wg sync.WaitGroup
	for i := range race {
		wg.Go(func() { race[i], errs[i] = reset(i%3, "race") })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	check("race", race)

	// The world ledger: a fact established on node 1, in a prompt on node 2.
	search := func(n int, query string) {
		t.Helper()
		out, err := anyNodeDo(ctx, h, nodes[n], "POST", "/v1/sessions", map[string]any{"world_id": "quillfern-search"})
		var s struct {
			SessionID string `json:"session_id"`
		}
		if err != nil || json.Unmarshal(out, &s) != nil {
			t.Fatalf("create on node %d: %s, %v", n, out, err)
		}
		if _, err := anyNodeDo(ctx, h, nodes[n], "POST", "/v1/sessions/"+s.SessionID+"/step",
			map[string]any{"action": map[string]any{"name": "search", "arguments": map[string]any{"query": query}}}); err != nil {
			t.Fatal(err)
		}
	}
	search(1, "quillfern optics, session A")
	search(2, "quillfern staff, session B")
	mu.Lock()
	var b string // the last prompt of session B's step
	for _, msgs := range asked {
		if c := msgs[len(msgs)-1].Content; strings.Contains(c, "session B") {
			b = c
		}
	}
	mu.Unlock()
	if !strings.Contains(b, "emp-9") || !strings.Contains(b, "title: Head of Optics") {
		t.Fatalf("the prompt of session B on node 2 lacks the fact session A established on node 1:\n%s", b)
	}

	var grpo []member
	for _, n := range []int{0, 1, 2} {
		m, err := reset(n, "grpo")
		if err != nil {
			t.Fatal(err)
		}
		grpo = append(grpo, m)
	}
	_ = nodes[0].cmd.Process.Kill()
	_, _ = nodes[0].cmd.Process.Wait()
	for _, n := range []int{1, 2, 2, 1} {
		m, err := reset(n, "grpo")
		if err != nil {
			t.Fatal(err)
		}
		grpo = append(grpo, m)
	}
	check("grpo, node 0 killed after its first reset", grpo)
	if grpo[0].parent == race[0].parent {
		t.Fatalf("two groups share the root %s", race[0].parent)
	}

	mu.Lock()
	before := len(asked)
	mu.Unlock()
	for i, m := range grpo[3:] { // the members on the live nodes
		if _, err := anyNodeDo(ctx, h, nodes[m.node], "POST", "/step", map[string]any{"session_id": m.id, "action": anyNodeAction(0, 1)}); err != nil {
			t.Fatalf("member %d: %v", 3+i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	firsts := asked[before:]
	if len(firsts) != len(grpo)-3 {
		t.Fatalf("%d model requests for %d first steps", len(firsts), len(grpo)-3)
	}
	for i, r := range firsts {
		if d := cmp.Diff(firsts[0], r); d != "" {
			t.Fatalf("first steps ask the model differently (-first +%d):\n%s", i, d)
		}
	}
}
