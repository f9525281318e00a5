package jetstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/testkit"
)

// followerOnly hides a store's AppendFactsAt: a ledger over it appends
// unconditionally and reads its facts back, as ledgers did before
// appending at positions.
type followerOnly struct{ fiction.Follower }

// countedStore counts a store's refused appends at a position.
type countedStore struct {
	*jetstore.Store
	refused *atomic.Int64
}

func (s countedStore) AppendFactsAt(ctx context.Context, world string, at uint64, facts []fiction.Fact) (uint64, error) {
	pos, err := s.Store.AppendFactsAt(ctx, world, at, facts)
	if errors.Is(err, fiction.ErrPositionMoved) {
		s.refused.Add(1)
	}
	return pos, err
}

// BenchmarkLedgerStep: the ledger's part of a step in a fictional world
// (its state text, then recording one new fact of the observation), with
// the ledger appending at its position (position) or appending and
// reading its facts back (readback). x1: one session after another on
// one embedded server. R3-1: the same through one node of a three-server
// cluster (all servers and nodes in this process). R3-24: 24 sessions of
// one world at once through the cluster's three nodes, each step
// recording a fact, so appends meet other nodes' all the time
// (refused-%: appends at a position refused per step). cpu-µs/step is the
// process's CPU per step. Compare the two paths by alternating runs of one
// test binary.
func BenchmarkLedgerStep(b *testing.B) {
	for _, setup := range []string{"x1", "R3-1", "R3-24"} {
		for _, path := range []string{"readback", "position"} {
			b.Run(setup+"/"+path, func(b *testing.B) {
				var stores []*jetstore.Store
				sessions := 1
				if setup == "x1" {
					stores = []*jetstore.Store{open(b, serve(b), nil)}
				} else {
					stores, _ = openCluster(b, nil)
					if setup == "R3-1" {
						stores = stores[:1]
					} else {
						sessions = 24
					}
				}
				var refused atomic.Int64
				ledgers := make([]*fiction.Ledger, len(stores))
				for i, st := range stores {
					var fs fiction.Store = countedStore{st, &refused}
					if path == "readback" {
						fs = followerOnly{st}
					}
					ledgers[i] = fiction.NewLedger(fs, nil)
				}
				ctx := b.Context()
				// the facts stream exists before the clock starts
				if _, err := ledgers[0].Observe(ctx, "w", "warm-up", 0, `{"id":"e","v":"0"}`); err != nil {
					b.Fatal(err)
				}
				var left atomic.Int64
				left.Store(int64(b.N))
				var wg sync.WaitGroup
				b.ResetTimer()
				c0 := testkit.CPUTime()
				for g := range sessions {
					wg.Go(func() {
						l, session := ledgers[g%len(ledgers)], fmt.Sprintf("S%d", g)
						for n := 1; left.Add(-1) >= 0; n++ {
							if _, err := l.StateText(ctx, "w", session); err != nil {
								b.Error(err)
								return
							}
							obs := fmt.Sprintf(`{"id":"e%d","s%d":"%d"}`, n%50, g, n)
							if rec, err := l.Observe(ctx, "w", session, n, obs); err != nil || len(rec) != 1 {
								b.Errorf("step %d of %s recorded %v, %v", n, session, rec, err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64((testkit.CPUTime()-c0).Microseconds())/float64(b.N), "cpu-µs/step")
				if path == "position" {
					b.ReportMetric(100*float64(refused.Load())/float64(b.N), "refused-%")
				}
			})
		}
	}
}
