package jetstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store/storetest"
)

// TestWalksRetryUnansweredReads: loading a session and reading a world's
// ledger both read a subject message by message, and both try a read
// the cluster does not answer again (a stream electing its leader), so
// they come back complete; when no read is answered within the store's
// Wait, both fail with sim.ErrStoreUnavailable naming what they read.
func TestWalksRetryUnansweredReads(t *testing.T) {
	nc := serve(t)
	ctx := t.Context()
	st := open(t, nc, nil)
	rec := storetest.Session("s_walk")
	if err := st.CreateSession(ctx, rec, nil); err != nil {
		t.Fatal(err)
	}
	var want []sim.TurnRecord
	var facts []fiction.Fact
	for i := range 3 {
		turn := sim.TurnRecord{Turn: i + 1, HistoryTurn: sim.HistoryTurn{Action: "ls", Observation: strings.Repeat("a", i)}}
		if err := st.AppendTurn(ctx, rec.ID, turn, sim.StatusActive); err != nil {
			t.Fatal(err)
		}
		want = append(want, turn)
		f := fiction.Fact{World: "w", Entity: "e", Attribute: "a", Value: strings.Repeat("v", i+1), Session: "S", Turn: i + 1, Source: fiction.SourceObservation}
		if err := st.AppendFacts(ctx, "w", []fiction.Fact{f}); err != nil {
			t.Fatal(err)
		}
		facts = append(facts, f)
	}
	load := func(st *jetstore.Store) (any, error) {
		_, turns, err := st.LoadSession(ctx, rec.ID)
		return turns, err
	}
	ledger := func(st *jetstore.Store) (any, error) {
		got, _, err := st.FactsAfter(ctx, "w", 0)
		return got, err
	}
	for _, tc := range []struct {
		name       string
		read       func(*jetstore.Store) (any, error)
		want       any
		last, msgs int // reads that go unanswered
		wait       time.Duration
		err        string // "" for success
	}{
		{name: "session", read: load, want: want, last: 2, msgs: 2, wait: time.Minute},
		{name: "ledger", read: ledger, want: facts, last: 2, msgs: 2, wait: time.Minute},
		{name: "session, no answer", read: load, last: 1 << 30, wait: 300 * time.Millisecond, err: "load session s_walk"},
		{name: "ledger, no answer", read: ledger, msgs: 1 << 30, wait: 300 * time.Millisecond, err: "read ledger w from sequence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := open(t, nc, &jetstore.Options{Wait: tc.wait})
			if _, _, err := r.FactsAfter(ctx, "w", 3); err != nil { // opens the facts stream
				t.Fatal(err)
			}
			jetstore.UnansweredReads(r, tc.last, tc.msgs)
			got, err := tc.read(r)
			if tc.err != "" {
				if !errors.Is(err, sim.ErrStoreUnavailable) || !strings.Contains(err.Error(), tc.err) || errors.Is(err, context.Canceled) {
					t.Fatalf("read without answers: %v, want ErrStoreUnavailable naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("read after unanswered reads (-want +got):\n%s", d)
			}
		})
	}
}
