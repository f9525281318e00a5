package jetstore_test

import (
	"context"
	"errors"
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

// TestAppendFactsAt: a ledger batch is appended only at the world's last
// position, which the answer gives; an append at an older one is refused
// as fiction.ErrPositionMoved and adds nothing; one whose acknowledgement
// was lost is recognised as stored, once.
func TestAppendFactsAt(t *testing.T) {
	nc := serve(t)
	ctx := t.Context()
	st := open(t, nc, nil)
	fact := func(v string) []fiction.Fact {
		return []fiction.Fact{{World: "w", Entity: "e", Attribute: "a", Value: v, Session: "S", Source: fiction.SourceObservation}}
	}
	var pos uint64
	for _, tc := range []struct {
		name    string
		at      func() uint64
		lose    bool // the acknowledgement is lost
		moved   bool
		wantAll []string
	}{
		{name: "empty world", at: func() uint64 { return 0 }, wantAll: []string{"1"}},
		{name: "empty world again", at: func() uint64 { return 0 }, moved: true, wantAll: []string{"1"}},
		{name: "at the last", at: func() uint64 { return pos }, wantAll: []string{"1", "3"}},
		{name: "at the one before", at: func() uint64 { return pos - 1 }, moved: true, wantAll: []string{"1", "3"}},
		{name: "acknowledgement lost", at: func() uint64 { return pos }, lose: true, wantAll: []string{"1", "3", "5"}},
	} {
		v := fmt.Sprint(len(tc.wantAll)*2 - 1)
		if tc.moved {
			v = "refused"
		}
		if tc.lose {
			jetstore.LoseAcks(st, 1)
		}
		at, err := st.AppendFactsAt(ctx, "w", tc.at(), fact(v))
		switch {
		case tc.moved && !errors.Is(err, fiction.ErrPositionMoved):
			t.Fatalf("%s: %v, want ErrPositionMoved", tc.name, err)
		case !tc.moved && (err != nil || at <= pos):
			t.Fatalf("%s: position %d, %v; want one after %d", tc.name, at, err, pos)
		case !tc.moved:
			pos = at
		}
		facts, last, err := st.FactsAfter(ctx, "w", 0)
		var got []string
		for _, f := range facts {
			got = append(got, f.Value)
		}
		if d := cmp.Diff(tc.wantAll, got); d != "" || err != nil || last != pos {
			t.Fatalf("%s: ledger at %d (want %d), %v; facts (-want +got):\n%s", tc.name, last, pos, err, d)
		}
	}
}

// TestAppendFactsAtLostAckThenAnother: an append at a position whose
// acknowledgement was lost, with another ledger's facts appended after it
// before the call tried again, is recognised as stored (the first message
// after the position is this call's), not refused and appended again.
func TestAppendFactsAtLostAckThenAnother(t *testing.T) {
	nc := serve(t)
	ctx := t.Context()
	a, b := open(t, nc, nil), open(t, nc, nil)
	fact := func(v, session string) []fiction.Fact {
		return []fiction.Fact{{World: "w", Entity: "e", Attribute: "a", Value: v, Session: session, Source: fiction.SourceObservation}}
	}
	first, err := a.AppendFactsAt(ctx, "w", 0, fact("first", "A"))
	if err != nil {
		t.Fatal(err)
	}
	jetstore.LoseAckThen(a, func() {
		if err := b.AppendFacts(ctx, "w", fact("other", "B")); err != nil {
			t.Error(err)
		}
	})
	at, err := a.AppendFactsAt(ctx, "w", first, fact("mine", "A"))
	if err != nil || at != first+1 {
		t.Fatalf("AppendFactsAt after a lost acknowledgement: position %d, %v; want %d", at, err, first+1)
	}
	facts, _, err := a.FactsAfter(ctx, "w", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range facts {
		got = append(got, f.Value)
	}
	if d := cmp.Diff([]string{"first", "mine", "other"}, got); d != "" {
		t.Errorf("ledger (-want +got):\n%s", d)
	}
}
