package rejection

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
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
		s := expand.Sample{ID: fmt.Sprintf("t%d#3", i), TrajectoryID: fmt.Sprintf("t%d", i), Domain: domains[i%len(domains)], Turn: 3, TotalTurns: 3,
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

// heapCycles runs f and returns the live heap each garbage collection
// during f found (runtime/metrics /gc/heap/live:bytes, read when
// /gc/cycles/total:gc-cycles moved on) above its level before f, and the
// peak of HeapInuse likewise, both sampled every millisecond (a collection
// finishing less than a millisecond after another is missed). HeapInuse
// adds the garbage not yet collected, up to the GC's target (GOGC) over
// the live heap, so its peak says as much about when collections fell as
// about what was held.
func heapCycles(f func()) (live []uint64, inuse uint64) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	var ms runtime.MemStats
	metrics.Read(s)
	runtime.ReadMemStats(&ms)
	baseLive, cycle, baseInuse := s[0].Value.Uint64(), s[1].Value.Uint64(), ms.HeapInuse
	peakInuse := baseInuse
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			if c := s[1].Value.Uint64(); c != cycle {
				cycle = c
				live = append(live, max(s[0].Value.Uint64(), baseLive)-baseLive)
			}
			runtime.ReadMemStats(&ms)
			peakInuse = max(peakInuse, ms.HeapInuse)
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
	return live, peakInuse - baseInuse
}

// quantile is the q-quantile (0 < q ≤ 1, nearest rank) of vs in MB.
func quantile(vs []uint64, q float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	i := min(max(int(math.Ceil(q*float64(len(s))))-1, 0), len(s)-1)
	return float64(s[i]) / (1 << 20)
}

// memChildEnv names the input file a child process of
// BenchmarkSampleMemory samples (TestSampleMemoryChild).
const memChildEnv = "AGENTWORLD_SAMPLEMEM_CHILD"

// memReport is what a child of BenchmarkSampleMemory measured.
type memReport struct {
	Live     []uint64      `json:"live"`
	Inuse    uint64        `json:"inuse"`
	Samples  int64         `json:"samples"`
	Resumed  int64         `json:"resumed"`
	Elapsed  time.Duration `json:"elapsed"`
	NumCycle int           `json:"cycles"`
}

// TestSampleMemoryChild is BenchmarkSampleMemory's measured process: it
// samples the input memChildEnv names into a fresh directory beside it
// and writes a memReport to the input's path plus ".report".
func TestSampleMemoryChild(t *testing.T) {
	in := testkit.ChildEnv(t, memChildEnv, "BenchmarkSampleMemory")
	sc, err := reward.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	out := in + ".out"
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	var res *Result
	start := time.Now()
	live, inuse := heapCycles(func() {
		res, err = Run(context.Background(), []string{in}, out, &Options{
			Teacher: instantTeacher{}, TeacherModel: "teacher", Scorer: sc, Beams: 2, Concurrency: 64, Policy: Policy{MinReward: 0}})
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := memReport{Live: live, Inuse: inuse, Samples: res.Summary.Total.Samples, Resumed: res.Resumed, Elapsed: time.Since(start), NumCycle: len(live)}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in+".report", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSampleMemory samples 100 MB and 1 GB of samples with long
// histories (20 MB and 100 MB with -short), both with 64 requests in
// flight, and compares the live heap the garbage collections of each
// found: what a run holds is bounded by its window of samples and beams in
// flight, not by its input (goal: the larger input's peak within 1.1× the
// smaller's).
//
// Each run is a child process (TestSampleMemoryChild) holding nothing but
// the pipeline and the instant teacher, with GODEBUG=gcstoptheworld=1: a
// concurrent collection counts as live all that was allocated while it
// marked, which at this pipeline's allocation rate (about ten times its
// input) was as much as half of the figure and varied with the machine's
// load; with the world stopped a collection's live heap is exactly what
// was reachable.
//
// A run's peak is the largest of those live heaps, and how full the window
// is at a collection depends on scheduling and fsync stalls: a run ten
// times as long draws ten times as often from the same distribution and
// is likelier to meet its tail. So the smaller input is sampled as often
// as it takes to process as much input as the larger (ten runs of 100 MB
// against one of 1 GB) and the peaks compare the same number of draws; the
// 95th percentile, the first small run's peak alone and the peak HeapInuse
// growth (garbage included) are printed beside them.
func BenchmarkSampleMemory(b *testing.B) {
	sizes := []int64{100 << 20, 1 << 30}
	if testing.Short() {
		sizes = []int64{20 << 20, 100 << 20}
	}
	dir := b.TempDir()
	godebug := "gcstoptheworld=1"
	if g := os.Getenv("GODEBUG"); g != "" {
		godebug = g + "," + godebug
	}
	sample := func(in string, n int) memReport {
		cmd := testkit.Child("TestSampleMemoryChild", memChildEnv+"="+in, "GODEBUG="+godebug)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("child sampling %s: %v\n%s", in, err, out)
		}
		var rep memReport
		buf, err := os.ReadFile(in + ".report")
		if err == nil {
			err = json.Unmarshal(buf, &rep)
		}
		if err != nil {
			b.Fatal(err)
		}
		if rep.Samples != int64(n) || rep.Resumed != 0 {
			b.Fatalf("%d samples summarized, %d resumed; want %d and 0", rep.Samples, rep.Resumed, n)
		}
		return rep
	}
	small, large := filepath.Join(dir, "small.jsonl"), filepath.Join(dir, "large.jsonl")
	nSmall := writeSamples(b, small, 0, sizes[0], 64<<10)
	runs := int(sizes[1] / sizes[0])
	var first float64
	var smallLive []uint64
	var smallInuse uint64
	var smallTime time.Duration
	peaks := make([]string, runs)
	for i := range runs {
		rep := sample(small, nSmall)
		if i == 0 {
			first = quantile(rep.Live, 1)
		}
		peaks[i] = fmt.Sprintf("%.1f", quantile(rep.Live, 1))
		smallLive, smallInuse, smallTime = append(smallLive, rep.Live...), max(smallInuse, rep.Inuse), smallTime+rep.Elapsed
	}
	os.Remove(small)
	nLarge := writeSamples(b, large, 0, sizes[1], 64<<10)
	rep := sample(large, nLarge)
	os.Remove(large)
	mb := func(v uint64) float64 { return float64(v) / (1 << 20) }
	b.Logf("%d runs of %d MB (%d samples, 2 beams, 64 in flight) in %v: %d collections, live heap 95th percentile %.1f MB, peak %.1f MB (runs: %s MB); HeapInuse growth %.1f MB",
		runs, sizes[0]>>20, nSmall, smallTime.Round(100*time.Millisecond), len(smallLive), quantile(smallLive, 0.95), quantile(smallLive, 1), strings.Join(peaks, " "), mb(smallInuse))
	b.Logf("1 run of %d MB (%d samples) in %v: %d collections, live heap 95th percentile %.1f MB, peak %.1f MB; HeapInuse growth %.1f MB",
		sizes[1]>>20, nLarge, rep.Elapsed.Round(100*time.Millisecond), len(rep.Live), quantile(rep.Live, 0.95), quantile(rep.Live, 1), mb(rep.Inuse))
	ratio := quantile(rep.Live, 1) / quantile(smallLive, 1)
	b.Logf("peak live heap at %d MB / at %d MB (%d runs): %.2f (goal ≤ 1.1: memory flat in the input size); 95th percentile %.2f; against the first %d MB run alone %.2f; HeapInuse growth %.2f; load average %s",
		sizes[1]>>20, sizes[0]>>20, runs, ratio, quantile(rep.Live, 0.95)/quantile(smallLive, 0.95), sizes[0]>>20, quantile(rep.Live, 1)/first, float64(rep.Inuse)/float64(smallInuse), loadAverage())
	b.ReportMetric(quantile(smallLive, 1), "MB_peak_small")
	b.ReportMetric(quantile(rep.Live, 1), "MB_peak_large")
	b.ReportMetric(ratio, "x_large/small")
}
