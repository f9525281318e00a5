package reward

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// latencyJudge answers after a fixed latency, counting calls.
type latencyJudge struct {
	d     time.Duration
	calls atomic.Int64
}

func (j *latencyJudge) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	j.calls.Add(1)
	if err := sleepCtx(ctx, j.d); err != nil {
		return nil, err
	}
	return verdictJudge{}.Complete(ctx, req)
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// BenchmarkJudgeThroughput scores batches with 64 judge calls in flight
// against a judge of fixed latency and reports the wall time over the ideal
// (calls × latency / in flight): the goal is at most 1.5.
func BenchmarkJudgeThroughput(b *testing.B) {
	const inFlight, latency = 64, 50 * time.Millisecond
	const items = inFlight * 16
	j := &latencyJudge{d: latency}
	s, err := New(&Options{Judge: j, JudgeModel: "bench-judge", MaxConcurrency: inFlight, CacheSize: -1})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]Item, items)
	var elapsed time.Duration
	b.ResetTimer()
	for n := range b.N {
		for i := range batch {
			batch[i] = item(fmt.Sprint(i), tag(fmt.Sprintf("%s\n%d-%d", screen, n, i)), screen)
		}
		start := time.Now()
		s.ScoreBatch(context.Background(), batch)
		elapsed += time.Since(start)
	}
	ideal := time.Duration(j.calls.Load()) * latency / inFlight
	b.ReportMetric(float64(elapsed)/float64(ideal), "x-ideal")
	b.ReportMetric(float64(j.calls.Load())/elapsed.Seconds(), "judge-calls/s")
	if st := s.Stats(); st.MaxInFlight > inFlight {
		b.Fatalf("%d calls in flight, limit %d", st.MaxInFlight, inFlight)
	}
}

// observation2KB is a terminal screen of about 2 KB with the volatile
// values real screens carry (times, durations, hashes).
func observation2KB() string {
	var b strings.Builder
	b.WriteString("root@4c1f2e9a7b3d:/app# python3 -m pytest -q tests/\n")
	for i := 0; b.Len() < 1900; i++ {
		fmt.Fprintf(&b, "tests/test_mod%02d.py::test_case_%d PASSED at 10:%02d:%02d in 0.%03ds [%x]\n", i, i, i%60, (i*7)%60, i*13%1000, 0xdeadbeef00+i)
	}
	b.WriteString("42 passed in 1.23s\nroot@4c1f2e9a7b3d:/app# ")
	return b.String()
}

// BenchmarkRule measures the rule component alone on 2 KB observations in
// one goroutine; the goal is at least 20,000 items per second per core.
// It reports items per second of wall time and per second of the process's
// CPU time (items/cpu-s, which is what one core does even when other
// processes share the machine), and the latter over the goal. The
// prediction differs from the truth in its volatile values everywhere and
// in one deterministic value, the common case of a good prediction.
func BenchmarkRule(b *testing.B) {
	truth := observation2KB()
	pred := strings.ReplaceAll(strings.ReplaceAll(truth, " at 10:", " at 11:"), "42 passed", "41 passed")
	action := "### Turn 1\n**Action:**\n[{\"keystrokes\": \"python3 -m pytest -q tests/\\n\", \"duration\": 5}]"
	b.SetBytes(int64(len(truth)))
	b.ResetTimer()
	start, cpu0 := time.Now(), testkit.CPUTime()
	for range b.N {
		if ok, _ := Rule(domain.Terminal, action, pred, truth); ok {
			b.Fatal("the deterministic difference passed")
		}
	}
	wall, cpu := time.Since(start), testkit.CPUTime()-cpu0
	b.ReportMetric(float64(b.N)/wall.Seconds(), "items/s")
	if cpu <= 0 {
		cpu = wall
	}
	perCore := float64(b.N) / cpu.Seconds()
	b.ReportMetric(perCore, "items/cpu-s")
	b.ReportMetric(perCore/20000, "x-goal")
}
