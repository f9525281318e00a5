package server

import (
	"context"
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
// OpenAI-compatible server over loopback. Run A steps 256 sessions x 20
// turns through the simulator's HTTP API (in-memory store) and records
// every prompt the fake model receives; run B sends exactly those requests
// to the fake model directly from 256 goroutines with the same client and
// the same pacing. It reports p50/p99 latencies and their differences, and
// the process CPU each step costs.
//
// Two pacings are measured. "paced": each session pauses an agent's think
// time (200 ms on average) before each step, as agents do between actions;
// 256 such sessions offer ~1,300 steps/s, below what two cores serve, so the
// difference is the server's own added latency. "saturated": sessions step
// back to back; on two cores the run is then CPU-bound and latency is queueing
// (concurrency x CPU per step / cores), so the difference measures the extra
// CPU of the server's HTTP hop multiplied by the queue, not a per-step delay.
// The goal applies to the paced figure; both are printed.
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

// stepOverheadSideBySide runs the two paths at the same time, 128 sessions
// through the server and 128 direct callers, so that both see the same
// machine (the runs above happen one after the other, and on a shared
// machine their tails move by tens of milliseconds between runs). The
// direct callers send the prompts of an identical earlier run through the
// server; they differ from the concurrent run's only in the fake model's
// request counter.
func stepOverheadSideBySide(b *testing.B, think time.Duration) {
	const half, steps = 128, 20
	model := newFakeModel(b)
	c := worldmodel.New(model.URL(), "wm", &worldmodel.Options{MaxRetries: -1})
	loadRun(b, half, steps, half, c, "", 0)
	reqs := model.Requests()
	var mu sync.Mutex
	var direct []time.Duration
	var g errgroup.Group
	per := (len(reqs) + half - 1) / half
	for s := 0; s < half; s++ {
		lo, hi := s*per, min((s+1)*per, len(reqs))
		g.Go(func() error {
			for i, msgs := range reqs[lo:hi] {
				pause(think, s, i+1)
				start := time.Now()
				if _, err := c.Complete(context.Background(), worldmodel.Request{Messages: msgs, MaxTokens: 32768}); err != nil {
					return err
				}
				d := time.Since(start)
				mu.Lock()
				direct = append(direct, d)
				mu.Unlock()
			}
			return nil
		})
	}
	through := loadRun(b, half, steps, half, c, "", think)
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	p := func(ds []time.Duration, q int) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)*q/100]
	}
	t50, t99, d50, d99 := p(through, 50), p(through, 99), p(direct, 50), p(direct, 99)
	b.ReportMetric(float64((t99 - d99).Microseconds()), "p99_overhead_us")
	b.ReportMetric(float64((t50 - d50).Microseconds()), "p50_overhead_us")
	b.Logf("side by side, think %v: %d steps through the server: p50 %v p99 %v; %d direct calls: p50 %v p99 %v; overhead p50 %v p99 %v (goal p99 <= 1ms)",
		think, len(through), t50, t99, len(direct), d50, d99, t50-d50, t99-d99)
}

func stepOverhead(b *testing.B, think time.Duration) {
	const sessions, steps = 256, 20
	model := newFakeModel(b)
	c := worldmodel.New(model.URL(), "wm", &worldmodel.Options{MaxRetries: -1})
	cpu0 := cpuTime()
	through := loadRun(b, sessions, steps, sessions, c, "", think)
	cpuThrough := cpuTime() - cpu0
	reqs := model.Requests()
	var mu sync.Mutex
	var direct []time.Duration
	var g errgroup.Group
	g.SetLimit(sessions)
	per := (len(reqs) + sessions - 1) / sessions
	cpu1 := cpuTime()
	for s := 0; s < sessions; s++ {
		lo, hi := s*per, min((s+1)*per, len(reqs))
		g.Go(func() error {
			for i, msgs := range reqs[lo:hi] {
				pause(think, s, i+1)
				start := time.Now()
				if _, err := c.Complete(context.Background(), worldmodel.Request{Messages: msgs, MaxTokens: 32768}); err != nil {
					return err
				}
				d := time.Since(start)
				mu.Lock()
				direct = append(direct, d)
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	cpuDirect := cpuTime() - cpu1
	perThrough, perDirect := cpuThrough/time.Duration(len(through)), cpuDirect/time.Duration(len(direct))
	b.ReportMetric(float64((perThrough - perDirect).Microseconds()), "cpu_overhead_us/step")
	b.Logf("process CPU per step: %v through the server, %v direct, %v added by the server", perThrough, perDirect, perThrough-perDirect)
	p := func(ds []time.Duration, q int) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)*q/100]
	}
	t50, t99, d50, d99 := p(through, 50), p(through, 99), p(direct, 50), p(direct, 99)
	b.ReportMetric(float64((t99 - d99).Microseconds()), "p99_overhead_us")
	b.ReportMetric(float64((t50 - d50).Microseconds()), "p50_overhead_us")
	b.Logf("think %v: %d steps through the server: p50 %v p99 %v; %d direct calls: p50 %v p99 %v; overhead p50 %v p99 %v (goal p99 <= 1ms, paced)",
		think, len(through), t50, t99, len(direct), d50, d99, t50-d50, t99-d99)
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
