package rejection

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/dataset"
	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
	"github.com/agentworld/agentworld/internal/worldmodel/fakellm"
)

var largeInput = flag.Bool("rejection.gb", false, "BenchmarkSampleMemory: compare 100 MB with 1 GB of input (about 10 minutes on 2 busy cores; writes about 2 GB to the temp dir) instead of 20 MB with 100 MB")

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
// measures the pipeline and not an HTTP server in the same heap.
type instantTeacher struct{}

func (instantTeacher) Complete(_ context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	return &worldmodel.Response{Content: "<think>weighing</think>\n<predicted_observation>\nstep done\n</predicted_observation>", FinishReason: "stop"}, nil
}

// BenchmarkSampleMemory samples 20 MB and 100 MB of samples with long
// histories (100 MB and 1 GB with -rejection.gb) and reports the peak heap
// growth of each and their ratio: streaming keeps it flat (goal: the larger
// input's peak within 1.5× the smaller's).
func BenchmarkSampleMemory(b *testing.B) {
	sizes := []int64{20 << 20, 100 << 20}
	if *largeInput {
		sizes = []int64{100 << 20, 1 << 30}
	}
	dir := b.TempDir()
	var peaks []float64
	for _, size := range sizes {
		in := filepath.Join(dir, fmt.Sprint("in", size, ".jsonl"))
		n := writeSamples(b, in, 0, size, 64<<10)
		sc, err := reward.New(nil)
		if err != nil {
			b.Fatal(err)
		}
		var res *Result
		start := time.Now()
		grow := fakellm.HeapGrowth(func() {
			res, err = Run(context.Background(), []string{in}, filepath.Join(dir, fmt.Sprint("out", size)), &Options{
				Teacher: instantTeacher{}, TeacherModel: "teacher", Scorer: sc, Beams: 2, Concurrency: 64, Policy: Policy{MinReward: 0}})
		})
		if err != nil {
			b.Fatal(err)
		}
		if res.Summary.Total.Samples != int64(n) {
			b.Fatalf("%d samples summarized, want %d", res.Summary.Total.Samples, n)
		}
		mb := float64(grow) / (1 << 20)
		peaks = append(peaks, mb)
		b.Logf("input %d MB (%d samples, 2 beams): peak heap growth %.1f MB in %v", size>>20, n, mb, time.Since(start).Round(time.Second))
		os.RemoveAll(filepath.Join(dir, fmt.Sprint("out", size)))
		os.Remove(in)
	}
	ratio := peaks[1] / peaks[0]
	b.Logf("peak heap at %d MB / at %d MB: %.2f (goal ≤ 1.5: memory flat in the input size); load average %s", sizes[1]>>20, sizes[0]>>20, ratio, loadAverage())
	b.ReportMetric(peaks[0], "MB_peak_small")
	b.ReportMetric(peaks[1], "MB_peak_large")
	b.ReportMetric(ratio, "x_large/small")
}
