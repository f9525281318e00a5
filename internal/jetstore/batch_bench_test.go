//go:build linux

package jetstore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit"
)

// BenchmarkClusterAppend: CPU per append (of the three servers and the
// stores, all in this process) on an R3 stream, 64 sessions appending at
// once through the three servers, each append alone or group-committed
// (batch.go). Run with -benchtime=4000x; cpu-µs/append is the figure to
// compare; appends/batch is how many a batch carried on average,
// batched-% the share of appends that went in one.
func BenchmarkClusterAppend(b *testing.B) {
	for _, batching := range []bool{false, true} {
		b.Run(fmt.Sprintf("batching=%v", batching), func(b *testing.B) {
			stores, _ := openCluster(b, nil)
			if !batching {
				for _, st := range stores {
					jetstore.NoBatching(st)
				}
			}
			const sessions = 64
			ids := make([]string, sessions)
			for i := range ids {
				ids[i] = fmt.Sprintf("s_%d", i)
				createAll(b, stores[i%3], ids[i])
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			c0 := testkit.CPUTime()
			for i, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 1; left.Add(-1) >= 0; n++ {
						if err := stores[i%3].AppendTurn(b.Context(), id, turnOf(id, n), sim.StatusActive); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64((testkit.CPUTime()-c0).Microseconds())/float64(b.N), "cpu-µs/append")
			if batching {
				var sent, carried int64
				for _, st := range stores {
					s, _ := jetstore.Batches(st)
					sent, carried = sent+s, carried+jetstore.BatchedAppends(st)
				}
				b.ReportMetric(float64(carried)/float64(max(sent, 1)), "appends/batch")
				b.ReportMetric(100*float64(carried)/float64(b.N), "batched-%")
			}
		})
	}
}
