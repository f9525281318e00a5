package rejection

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/dataset"
	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
	"github.com/agentworld/agentworld/internal/worldmodel/fakellm"
)

// writeSamples writes expanded samples to path until it holds at least
// size bytes; each sample carries history of about turnBytes per turn.
func writeSamples(tb testing.TB, path string, n int, size int64, turnBytes int) int {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	filler := strings.Repeat("lorem ipsum dolor sit amet ", turnBytes/27+1)[:turnBytes]
	domains := []string{"terminal", "mcp", "web", "android"}
	var written int64
	count := 0
	for i := 0; (n > 0 && i < n) || (n == 0 && written < size); i++ {
		s := dataset.Sample{ID: fmt.Sprintf("t%d#3", i), TrajectoryID: fmt.Sprintf("t%d", i), Domain: domains[i%len(domains)], Turn: 3, TotalTurns: 3,
			System: "simulate the environment", Action: fmt.Sprintf("run step %d", i), Observation: fmt.Sprintf("step %d done", i)}
		for k := 0; k < 2; k++ {
			s.History = append(s.History, trajectory.Turn{Action: fmt.Sprintf("look %d-%d", i, k), Observation: filler})
		}
		b, err := json.Marshal(s)
		if err != nil {
			tb.Fatal(err)
		}
		w.Write(append(b, '\n'))
		written += int64(len(b)) + 1
		count++
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return count
}

// BenchmarkSampleConcurrency runs `data sample`'s pipeline with 64 teacher
// requests in flight against a fake teacher answering each after 50 ms, and
// reports elapsed / ideal, where ideal is the requests in rounds of 64 times
// 50 ms (the rules judge scores offline). Goal: ratio ≤ 1.5.
func BenchmarkSampleConcurrency(b *testing.B) {
	const (
		samples, beams, inFlight = 256, 4, 64
		delay                    = 50 * time.Millisecond
	)
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Delay: delay, Reasoning: "weighing the action", Content: "<predicted_observation>\nstep done\n</predicted_observation>"}
	})
	defer srv.Close()
	dir := b.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	writeSamples(b, in, samples, 0, 256)
	teacher := worldmodel.New(srv.URL, "teacher", nil)
	ideal := time.Duration((samples*beams+inFlight-1)/inFlight) * delay
	b.ResetTimer()
	var worst float64
	for i := 0; i < b.N; i++ {
		sc, err := reward.New(nil)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		res, err := Run(context.Background(), []string{in}, filepath.Join(dir, fmt.Sprint("out", i)), &Options{
			Teacher: teacher, TeacherModel: "teacher", Scorer: sc, Beams: beams, Concurrency: inFlight, Policy: DefaultPolicy})
		if err != nil {
			b.Fatal(err)
		}
		el := time.Since(start)
		if res.Requests != samples*beams {
			b.Fatalf("%d requests, want %d", res.Requests, samples*beams)
		}
		ratio := float64(el) / float64(ideal)
		worst = max(worst, ratio)
		b.Logf("%d requests, %d in flight, 50 ms each: %v against an ideal %v, ratio %.2f (goal ≤ 1.5); load average %s", res.Requests, inFlight, el.Round(time.Millisecond), ideal, ratio, loadAverage())
	}
	b.ReportMetric(worst, "x_ideal")
}

// loadAverage is the machine's 1, 5 and 15 minute load averages, which a
// ratio measured on shared cores needs beside it; "?" where unknown.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// instantTeacher answers at once, in process, so the memory benchmark
// measures the pipeline and not an HTTP server in the same heap: it holds
// nothing between calls, and each answer is a few hundred bytes that the
// pipeline itself keeps only as long as its beam.
type instantTeacher struct{}

func (instantTeacher) Complete(_ context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	return &worldmodel.Response{Content: "<think>weighing</think>\n<predicted_observation>\nstep done\n</predicted_observation>", FinishReason: "stop"}, nil
}

// heapPeaks runs f and returns the peak of the live heap (what the last
// garbage collection found reachable, runtime/metrics /gc/heap/live:bytes)
// above its level before f, and the peak of HeapInuse likewise, both
// sampled every millisecond. The live heap is what the pipeline holds;
// HeapInuse adds the garbage not yet collected, up to the GC's target
// (GOGC) over it, so its peak says as much about when collections fell
// as about what was held.
func heapPeaks(f func()) (live, inuse uint64) {
	runtime.GC()
	read := func() (uint64, uint64) {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return s[0].Value.Uint64(), ms.HeapInuse
	}
	baseLive, baseInuse := read()
	peakLive, peakInuse := baseLive, baseInuse
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			l, u := read()
			peakLive, peakInuse = max(peakLive, l), max(peakInuse, u)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return peakLive - baseLive, peakInuse - baseInuse
}

// BenchmarkSampleMemory samples 100 MB and 1 GB of samples with long
// histories (20 MB and 100 MB with -short), both with 64 requests in
// flight, and reports the peak live heap of each and their ratio: what a
// run holds is bounded by its window of samples, not by its input (goal:
// the larger input's peak within 1.1× the smaller's). The peak HeapInuse
// growth, garbage included, is printed beside it.
func BenchmarkSampleMemory(b *testing.B) {
	sizes := []int64{100 << 20, 1 << 30}
	if testing.Short() {
		sizes = []int64{20 << 20, 100 << 20}
	}
	dir := b.TempDir()
	var peaks, inuses []float64
	for _, size := range sizes {
		in := filepath.Join(dir, fmt.Sprint("in", size, ".jsonl"))
		n := writeSamples(b, in, 0, size, 64<<10)
		sc, err := reward.New(nil)
		if err != nil {
			b.Fatal(err)
		}
		var res *Result
		start := time.Now()
		live, inuse := heapPeaks(func() {
			res, err = Run(context.Background(), []string{in}, filepath.Join(dir, fmt.Sprint("out", size)), &Options{
				Teacher: instantTeacher{}, TeacherModel: "teacher", Scorer: sc, Beams: 2, Concurrency: 64, Policy: Policy{MinReward: 0}})
		})
		if err != nil {
			b.Fatal(err)
		}
		if res.Summary.Total.Samples != int64(n) {
			b.Fatalf("%d samples summarized, want %d", res.Summary.Total.Samples, n)
		}
		mb, inuseMB := float64(live)/(1<<20), float64(inuse)/(1<<20)
		peaks, inuses = append(peaks, mb), append(inuses, inuseMB)
		b.Logf("input %d MB (%d samples, 2 beams, 64 in flight): peak live heap %.1f MB (HeapInuse growth %.1f MB) in %v", size>>20, n, mb, inuseMB, time.Since(start).Round(time.Second))
		os.RemoveAll(filepath.Join(dir, fmt.Sprint("out", size)))
		os.Remove(in)
	}
	ratio := peaks[1] / peaks[0]
	b.Logf("peak live heap at %d MB / at %d MB: %.2f (goal ≤ 1.1: memory flat in the input size; HeapInuse %.2f); load average %s",
		sizes[1]>>20, sizes[0]>>20, ratio, inuses[1]/inuses[0], loadAverage())
	b.ReportMetric(peaks[0], "MB_peak_small")
	b.ReportMetric(peaks[1], "MB_peak_large")
	b.ReportMetric(ratio, "x_large/small")
}
