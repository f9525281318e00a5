package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/jetstore"
	_ "github.com/agentworld/agentworld/internal/natsserver" // the embedded server
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

// rootCounter is a node's JetStream store counting the private sessions
// (reset groups' roots) stored through it.
type rootCounter struct {
	*jetstore.Store
	roots *atomic.Int32
}

func (c rootCounter) CreateSession(ctx context.Context, rec sim.SessionRecord, turns []sim.TurnRecord) error {
	if rec.Private {
		c.roots.Add(1)
	}
	return c.Store.CreateSession(ctx, rec, turns)
}

// groupNode is one node of TestResetGroupsShareOneRootAcrossNodes.
type groupNode struct {
	*harness
	store *jetstore.Store
}

// startGroupNodes starts n servers over one embedded NATS server, each
// with its own connection, JetStream store (node name, lease) and
// manager, sharing reset groups through the store, and one fake model.
func startGroupNodes(t *testing.T, n int, roots *atomic.Int32) []*groupNode {
	t.Helper()
	srv, err := jetstore.StartServer(jetstore.ServerOptions{Name: "groups", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	spec, err := world.Parse([]byte(termSpec), "term.yaml")
	if err != nil {
		t.Fatal(err)
	}
	model := newFakeModel(t)
	nodes := make([]*groupNode, n)
	for i := range nodes {
		nc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		// a minute's lease: a loaded machine cannot let a live node's
		// lease lapse mid-test; the test ends node 0's by closing it
		st, err := jetstore.New(t.Context(), nc, &jetstore.Options{Node: fmt.Sprintf("n%d", i), Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		h := &harness{t: t, model: model, spec: spec, store: rootCounter{st, roots}}
		h.start("", &Options{Groups: st})
		nodes[i] = &groupNode{harness: h, store: st}
	}
	return nodes
}

// TestResetGroupsShareOneRootAcrossNodes: a GRPO group's resets spread
// over three nodes (JetStream stores on a real embedded NATS server) fork
// one root, made once: concurrently from every node at once, and one
// group after another whose root's node shuts down between its resets.
// Every member starts from the same observation with the same parent, and
// its first step asks the model exactly what the others' do; nothing asks
// the model for a root.
func TestResetGroupsShareOneRootAcrossNodes(t *testing.T) {
	var roots atomic.Int32
	nodes := startGroupNodes(t, 3, &roots)
	type member struct {
		node *groupNode
		r    api.OpenEnvResult
	}
	reset := func(n *groupNode, body string) (member, error) {
		var r api.OpenEnvResult
		if code := n.do(http.MethodPost, "/reset", body, &r); code != http.StatusOK {
			return member{}, fmt.Errorf("reset %s: %d", body, code)
		}
		return member{n, r}, nil
	}
	parent := func(m member) string { p, _ := m.r.Metadata["parent"].(string); return p }
	check := func(group string, members []member, wantRoots int32) {
		t.Helper()
		seen := map[string]bool{}
		for i, m := range members {
			if parent(m) == "" || parent(m) != parent(members[0]) || m.r.Observation.Text != members[0].r.Observation.Text || seen[m.r.Observation.SessionID] {
				t.Fatalf("%s member %d: session %q parent %q observation %q; member 0: parent %q observation %q", group, i,
					m.r.Observation.SessionID, parent(m), m.r.Observation.Text, parent(members[0]), members[0].r.Observation.Text)
			}
			seen[m.r.Observation.SessionID] = true
		}
		if got := roots.Load(); got != wantRoots {
			t.Fatalf("%s: %d roots stored, want %d", group, got, wantRoots)
		}
	}

	// Twelve resets of one group at once, four per node.
	const race = `{"world_id":"term","group_key":"race"}`
	members := make([]member, 12)
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() { members[i], errs[i] = reset(nodes[i%3], race) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	check("race", members, 1)
	// Each member's first step, on the node that reset it, asks the model
	// what every other member's asks.
	before := len(nodes[0].model.Requests())
	const step = `{"action": [{"keystrokes": "ls\n", "duration": 1}]}`
	for _, m := range members {
		if code := m.node.do(http.MethodPost, "/v1/sessions/"+m.r.Observation.SessionID+"/step", step, nil); code != http.StatusOK {
			t.Fatalf("step %s: %d", m.r.Observation.SessionID, code)
		}
	}
	reqs := nodes[0].model.Requests()[before:]
	if len(reqs) != len(members) {
		t.Fatalf("%d model requests for %d first steps", len(reqs), len(members))
	}
	for i, r := range reqs {
		if d := cmp.Diff(reqs[0], r); d != "" {
			t.Fatalf("member %d's first request differs from member 0's (-0 +%d):\n%s", i, i, d)
		}
	}

	// One group reset first on node 0, which makes its root, then on the
	// others; node 0 shuts down and the group's later resets still fork
	// its root.
	const seq = `{"world_id":"term","group_key":"seq","seed":11}`
	var group []member
	for _, n := range []int{0, 1, 2} {
		m, err := reset(nodes[n], seq)
		if err != nil {
			t.Fatal(err)
		}
		group = append(group, m)
	}
	check("seq", group, 2)
	nodes[0].srv.Close()
	if err := nodes[0].m.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].store.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 1, 2} {
		m, err := reset(nodes[n], seq)
		if err != nil {
			t.Fatal(err)
		}
		group = append(group, m)
	}
	check("seq after node 0 shut down", group, 2)
	if got := len(nodes[1].model.Requests()); got != before+len(members) {
		t.Fatalf("the model was asked %d times more after the first steps", got-before-len(members))
	}
}
