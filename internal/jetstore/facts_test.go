package jetstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/jetstore"
)

// TestNodesShareWorldLedgers: the ledgers of two nodes over one JetStream
// server see each other's facts at their next use of a world; after
// concurrent steps on both they hold the same facts and render the same
// text; the facts outlive the nodes (a store opened afresh, on a server
// restarted on the same directory, reads them all back in order).
func TestNodesShareWorldLedgers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv := startServer(t, dir)
	nc := connect(t, srv)
	a := open(t, nc, &jetstore.Options{Node: "a", Lease: testLease})
	b := open(t, nc, &jetstore.Options{Node: "b", Lease: testLease})
	la, lb := fiction.NewLedger(a, nil), fiction.NewLedger(b, nil)
	if _, err := la.Observe(ctx, "quillfern", "A", 1, `{"id":"emp-77","title":"Head of Research"}`); err != nil {
		t.Fatal(err)
	}
	if got, err := lb.StateText(ctx, "quillfern", "B"); err != nil || !strings.Contains(got, "Head of Research") {
		t.Fatalf("node b's state text: %q, %v", got, err)
	}
	if rec, err := lb.Observe(ctx, "quillfern", "B", 1, `{"id":"emp-77","title":"Janitor"}`); err != nil || len(rec) != 1 {
		t.Fatalf("node b recorded %v, %v", rec, err)
	}
	if got, _ := la.StateText(ctx, "quillfern", "C"); !strings.Contains(got, "Janitor") || strings.Contains(got, "Head of Research") {
		t.Fatalf("node a's state text after node b's change: %q", got)
	}
	var wg sync.WaitGroup
	for i, l := range []*fiction.Ledger{la, lb, la, lb} {
		wg.Go(func() {
			for turn := range 20 {
				obs := fmt.Sprintf(`{"id":"e%d","k%d":"%d"}`, turn%4, i%2, turn)
				if _, err := l.Observe(ctx, "w", fmt.Sprintf("S%d", i), turn, obs); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, s := range []string{"", "S0", "S1"} {
		ta, _ := la.StateText(ctx, "w", s)
		tb, _ := lb.StateText(ctx, "w", s)
		if ta != tb || ta == "" {
			t.Errorf("session %q: node a's text differs from node b's:\n%s", s, cmp.Diff(ta, tb))
		}
	}
	before, err := a.WorldFacts(ctx, "w")
	if err != nil || len(before) == 0 {
		t.Fatalf("facts of w: %d, %v", len(before), err)
	}
	_ = a.Close()
	_ = b.Close()
	nc.Close()
	srv.Shutdown()
	srv = startServer(t, dir)
	t.Cleanup(srv.Shutdown)
	nc = connect(t, srv)
	t.Cleanup(nc.Close)
	after, err := open(t, nc, nil).WorldFacts(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after); d != "" {
		t.Fatalf("facts after a restart (-before +after):\n%s", d)
	}
	if facts, err := open(t, nc, nil).WorldFacts(ctx, "no such world"); err != nil || len(facts) != 0 {
		t.Fatalf("a world without facts: %v, %v", facts, err)
	}
}
