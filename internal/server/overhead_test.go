package server

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

// BenchmarkStepOverhead measures what a step through the server adds over
// calling the model server directly with the same prompts (goal: <= 1 ms at
// p99), at 256 concurrent sessions against a zero-latency fake
// OpenAI-compatible server over loopback. The through-server path steps
// sessions x 20 turns through the simulator's HTTP API (in-memory store) and
// records every prompt the fake model receives; the direct path sends those
// recorded requests to the fake model with the same client and pacing. It
// reports p50/p99 latencies and their differences, and (for the sequential
// modes) the process CPU each step costs.
//
// Modes. "paced": each session pauses an agent's think time (200 ms on
// average) before each step; 256 such sessions offer ~1,300 steps/s, which
// with the fake model and the clients in the same process keeps two cores
// busy enough that p99 is mostly CPU queueing. "saturated": back to back, so
// latency is queueing (concurrency x CPU per step / cores) and the difference
// is the server hop's extra CPU times the queue. "side-by-side": 128 sessions
// through the server and 128 direct callers at the same time, so both paths
// see the same machine (the sequential runs' tails move by tens of
// milliseconds between runs on a shared machine); the direct callers replay
// the prompts of an identical earlier run, which differ only in the fake
// model's request counter.
func BenchmarkStepOverhead(b *testing.B) {
	for _, mode := range []struct {
		name  string
		think time.Duration
	}{{"paced", 200 * time.Millisecond}, {"saturated", 0}} {
		b.Run(mode.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				stepOverhead(b, mode.think)
			}
		})
	}
	b.Run("side-by-side", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			stepOverheadSideBySide(b, 200*time.Millisecond)
		}
	})
}

func stepOverhead(b *testing.B, think time.Duration) {
	const sessions, steps = 256, 20
	model := newFakeModel(b)
	c := worldmodel.New(model.URL(), "wm", &worldmodel.Options{MaxRetries: -1})
	cpu0 := cpuTime()
	through := loadRun(b, sessions, steps, sessions, c, "", think)
	cpuThrough := cpuTime() - cpu0
	cpu1 := cpuTime()
	direct, err := startDirect(c, model.Requests(), sessions, think)()
	if err != nil {
		b.Fatal(err)
	}
	cpuDirect := cpuTime() - cpu1
	perThrough, perDirect := cpuThrough/time.Duration(len(through)), cpuDirect/time.Duration(len(direct))
	b.ReportMetric(float64((perThrough - perDirect).Microseconds()), "cpu_overhead_us/step")
	b.Logf("process CPU per step: %v through the server, %v direct, %v added by the server", perThrough, perDirect, perThrough-perDirect)
	reportOverhead(b, fmt.Sprintf("think %v", think), through, direct)
}

func stepOverheadSideBySide(b *testing.B, think time.Duration) {
	const half, steps = 128, 20
	model := newFakeModel(b)
	c := worldmodel.New(model.URL(), "wm", &worldmodel.Options{MaxRetries: -1})
	loadRun(b, half, steps, half, c, "", 0)
	wait := startDirect(c, model.Requests(), half, think)
	through := loadRun(b, half, steps, half, c, "", think)
	direct, err := wait()
	if err != nil {
		b.Fatal(err)
	}
	reportOverhead(b, fmt.Sprintf("side by side, think %v", think), through, direct)
}

// startDirect sends reqs to the model from callers goroutines, each pausing
// like a session of loadRun, and returns a function that waits for them and
// yields every call's latency.
func startDirect(c worldmodel.Completer, reqs [][]worldmodel.Message, callers int, think time.Duration) func() ([]time.Duration, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var g errgroup.Group
	per := (len(reqs) + callers - 1) / callers
	for s := 0; s < callers; s++ {
		lo, hi := min(s*per, len(reqs)), min((s+1)*per, len(reqs))
		g.Go(func() error {
			for i, msgs := range reqs[lo:hi] {
				pause(think, s, i+1)
				start := time.Now()
				if _, err := c.Complete(context.Background(), worldmodel.Request{Messages: msgs, MaxTokens: 32768}); err != nil {
					return err
				}
				d := time.Since(start)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
			return nil
		})
	}
	return func() ([]time.Duration, error) {
		err := g.Wait()
		return lat, err
	}
}

// reportOverhead reports the p50 and p99 differences between the two paths.
func reportOverhead(b *testing.B, label string, through, direct []time.Duration) {
	p := func(ds []time.Duration, q int) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)*q/100]
	}
	t50, t99, d50, d99 := p(through, 50), p(through, 99), p(direct, 50), p(direct, 99)
	b.ReportMetric(float64((t99 - d99).Microseconds()), "p99_overhead_us")
	b.ReportMetric(float64((t50 - d50).Microseconds()), "p50_overhead_us")
	b.Logf("%s: %d steps through the server: p50 %v p99 %v; %d direct calls: p50 %v p99 %v; overhead p50 %v p99 %v (goal p99 <= 1ms)",
		label, len(through), t50, t99, len(direct), d50, d99, t50-d50, t99-d99)
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
