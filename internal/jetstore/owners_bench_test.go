//go:build linux

package jetstore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// BenchmarkOwnerLookup: CPU per [jetstore.Store.Owner] (of the three
// servers and the stores, all in this process) on another node's
// sessions, owners bucket R3, 64 lookups at once: "miss" reads each
// session's owner record from the bucket, as a node does for a session's
// first request it does not own; "memory" asks again and is answered from
// what the first lookups kept. Run with -benchtime=2000x (each op needs a
// session, made before the timer starts).
func BenchmarkOwnerLookup(b *testing.B) {
	for _, cached := range []bool{false, true} {
		name := map[bool]string{false: "miss", true: "memory"}[cached]
		b.Run(name, func(b *testing.B) {
			owner, other, ids := ownedElsewhere(b, b.N)
			if cached {
				lookAll(b, owner, other, ids)
			}
			b.ResetTimer()
			c0 := testkit.CPUTime()
			lookAll(b, owner, other, ids)
			b.ReportMetric(float64((testkit.CPUTime()-c0).Nanoseconds())/1000/float64(b.N), "cpu-µs/lookup")
		})
	}
}

// ownedElsewhere starts three clustered servers, a store on two of them
// (owners bucket R3) and n sessions made by the first.
func ownedElsewhere(b *testing.B, n int) (owner, other *jetstore.Store, ids []string) {
	urls := natstest.StartCluster(b, 3, nil)
	var stores []*jetstore.Store
	for i, u := range urls[:2] {
		nc, err := nats.Connect(u)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(nc.Close)
		st := open(b, nc, &jetstore.Options{Node: fmt.Sprintf("n%d", i), Addr: fmt.Sprintf("http://n%d", i), Lease: testLease, Replicas: 3})
		b.Cleanup(func() { _ = st.Close() })
		stores = append(stores, st)
	}
	ids = make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("s_%d", i)
		if err := stores[0].CreateSession(b.Context(), sim.SessionRecord{ID: ids[i], Status: sim.StatusActive}, nil); err != nil {
			b.Fatal(err)
		}
	}
	return stores[0], stores[1], ids
}

// lookAll looks every session's owner up on other, 64 at once.
func lookAll(b *testing.B, owner, other *jetstore.Store, ids []string) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(ids)); i = next.Add(1) - 1 {
				if l, err := other.Owner(b.Context(), ids[i]); err != nil || l.Node != owner.Self() || !l.Alive {
					b.Errorf("owner of %s: %+v, %v", ids[i], l, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
