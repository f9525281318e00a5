package bench_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// BenchmarkRun700 is the throughput goal: bench run over 700 samples at
// concurrency 64 against an HTTP backend with a fixed 50 ms latency per call
// (model and judge) should take at most 2× the ideal
// samples × 2 calls × latency ÷ concurrency, which is ≥ 30× faster than a
// sequential loop (samples × 2 × latency; not run, computed).
//
//	go test -run '^$' -bench Run700 -benchtime 1x ./internal/bench
func BenchmarkRun700(b *testing.B) {
	const (
		samples     = 700
		concurrency = 64
		latency     = 50 * time.Millisecond
	)
	srv := fakellm.New(fakeBackend(latency))
	defer srv.Close()
	data := b.TempDir()
	writeData(b, data, samples)
	ideal := time.Duration(samples*2) * latency / concurrency
	sequential := time.Duration(samples*2) * latency
	// One HTTP connection per sample in flight.
	tr := &transportPool{}
	for i := 0; i < b.N; i++ {
		o := options(srv, data, b.TempDir())
		o.Concurrency = concurrency
		cl := &worldmodel.Options{HTTPClient: tr.client(concurrency), MaxRetryDelay: 5 * time.Millisecond}
		o.Model = worldmodel.New(srv.URL, "wm", cl)
		o.JudgeModel = worldmodel.New(srv.URL, "judge", cl)
		start := time.Now()
		sum, err := bench.Run(context.Background(), o)
		el := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if sum.Done != samples || len(sum.Failed) != 0 {
			b.Fatalf("summary %+v", sum)
		}
		b.ReportMetric(el.Seconds()/ideal.Seconds(), "x_ideal")
		b.ReportMetric(sequential.Seconds()/el.Seconds(), "x_faster_than_sequential")
		b.Logf("700 samples, concurrency 64, 50 ms/call: elapsed %s, ideal %s (ratio %.2f), sequential %s (speedup %.1f×)",
			el.Round(time.Millisecond), ideal, el.Seconds()/ideal.Seconds(), sequential, sequential.Seconds()/el.Seconds())
	}
}

type transportPool struct{}

func (transportPool) client(n int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 2 * n
	t.MaxConnsPerHost = 0
	return &http.Client{Transport: t}
}

// instantModel answers at once without HTTP, so the memory benchmark
// measures the pipeline, not a server.
type instantModel struct{}

func (instantModel) Complete(_ context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	if strings.HasPrefix(req.Messages[0].Content, "judge") {
		return &worldmodel.Response{Content: "SCORES 4 4 4 4 4", FinishReason: "stop"}, nil
	}
	return &worldmodel.Response{Content: "<predicted_observation>x</predicted_observation>", FinishReason: "stop"}, nil
}

// writeBigData writes rows of about rowKB kilobytes each (real rows average
// ~185 KB) until the data dir holds about mb megabytes.
func writeBigData(b *testing.B, dir string, mb, rowKB int) int {
	f, err := os.Create(filepath.Join(dir, "terminal_test.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	pad := strings.Repeat("x", rowKB<<10/8)
	rows := 0
	for size := 0; size < mb<<20; rows++ {
		rec := map[string]any{"task": "t/terminal", "id": rows, "system_str": "sys",
			"prompt":   []string{"ACTION-" + fmt.Sprint(rows) + "-1 " + pad, pad, pad, pad},
			"response": []string{pad, pad, pad, pad}, "current_prompt": "c", "turn_idx": 1 + rows%4, "total_turns": 4}
		line, _ := json.Marshal(rec)
		line = append(line, '\n')
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		size += len(line)
	}
	return rows
}

// BenchmarkStreamMemory shows the pipeline streams: the peak live heap while
// running over data dirs of growing size stays about the same (bounded by
// concurrency × row size), instead of growing with the data.
//
//	go test -run '^$' -bench StreamMemory -benchtime 1x ./internal/bench
func BenchmarkStreamMemory(b *testing.B) {
	for _, mb := range []int{25, 100, 400} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			data := b.TempDir()
			rows := writeBigData(b, data, mb, 185)
			for i := 0; i < b.N; i++ {
				o := &bench.Options{Data: data, Out: b.TempDir(), Concurrency: 16,
					Model: instantModel{}, ModelName: "wm", JudgeModel: instantModel{}, JudgeName: "judge", Rubric: testRubric{}}
				runtime.GC()
				peak := sampleHeap(func() {
					if _, err := bench.Run(context.Background(), o); err != nil {
						b.Fatal(err)
					}
				})
				b.ReportMetric(float64(peak)/(1<<20), "peak_heap_MB")
				b.Logf("%d MB data dir (%d rows of ~185 KB): peak heap %.1f MB", mb, rows, float64(peak)/(1<<20))
			}
		})
	}
}

// sampleHeap runs fn and returns the highest HeapAlloc seen meanwhile.
func sampleHeap(fn func()) uint64 {
	var (
		mu   sync.Mutex
		peak uint64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-t.C:
				runtime.ReadMemStats(&ms)
				mu.Lock()
				peak = max(peak, ms.HeapAlloc)
				mu.Unlock()
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	return peak
}

// BenchmarkRun840 is the harness goal: `bench run` over 840 rows of the
// published size (about 185 KB each, whole trajectories with escapes and
// non-ASCII text) against an endpoint that answers every call after 100 ms
// must be at least 50× faster than the published script's sequential floor
// (840 × 100 ms: one call at a time, no CPU at all), at 64 in flight. The
// endpoint drains each request and answers a fixed completion, so nearly
// all CPU the process spends is the harness's. It prints the ratio to that
// floor and the harness's CPU per sample beside the ideal: one decode of the
// row into plain strings and one encode of the request body, measured in
// the same run on the same rows (what any Go harness must spend), and how
// many requests the endpoint held on average (at most 64).
//
//	go test -run '^$' -bench Run840 -benchtime 1x ./internal/bench
func BenchmarkRun840(b *testing.B) {
	const (
		samples     = 840
		concurrency = 64
		latency     = 100 * time.Millisecond
	)
	var load inFlight
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		load.change(+1)
		defer load.change(-1)
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(latency)
		w.Header().Set("Content-Type", "application/json")
		// One answer serves the model (its prediction is "ok") and the
		// pairwise judge (its letter is A).
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"wm","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"<predicted_observation>ok</predicted_observation> \\boxed{A}"}}],"usage":{"prompt_tokens":40000,"completion_tokens":9}}`)
	}))
	// Connections opened: a transport that keeps too few idle ones opens
	// far more than the 64 in flight.
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	data := b.TempDir()
	size := writeRealisticData(b, data, samples)
	ideal := idealCPU(b, data)
	// The reference mode's reference predictions: an inference run, once.
	refOut := b.TempDir()
	if _, err := bench.Run(context.Background(), &bench.Options{Data: data, Out: refOut, Concurrency: concurrency, ModelName: "ref", Model: worldmodel.New(srv.URL, "ref", nil)}); err != nil {
		b.Fatal(err)
	}
	// cache=on is `bench run` without --no-cache: a fresh response cache,
	// so every request is hashed, misses and its answer is stored.
	// The pairwise variants ask the judge both orders: three calls per
	// sample (the model's and two judge calls), all counted in the floor.
	for _, variant := range []string{"judge=none", "judge=rules", "judge=none,cache=on", "judge=turing,both-orders", "judge=reference,both-orders"} {
		judgeName, cacheOn := strings.TrimPrefix(strings.TrimSuffix(variant, ",cache=on"), "judge="), strings.HasSuffix(variant, ",cache=on")
		pairMode, pairwise := strings.CutSuffix(judgeName, ",both-orders")
		calls := 1
		if pairwise {
			calls = 3
		}
		floor := time.Duration(samples*calls) * latency
		b.Run(variant, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				o := &bench.Options{Data: data, Out: b.TempDir(), Concurrency: concurrency, ModelName: "wm",
					// The model client as `bench run` makes it: its default
					// transport.
					Model: worldmodel.New(srv.URL, "wm", nil)}
				if judgeName == "rules" {
					o.Rules = judge.RuleScorer{}
				}
				if pairwise {
					o.JudgeModel, o.JudgeName, o.Rubric = worldmodel.New(srv.URL, "judge", nil), "judge", judge.Rubric{}
					o.JudgeMode, o.BothOrders = pairMode, true
					if pairMode == bench.ModeReference {
						o.Reference = filepath.Join(refOut, bench.PredictionsFile)
					}
				}
				if cacheOn {
					c, err := answercache.OpenCache(filepath.Join(o.Out, bench.CacheDir), nil)
					if err != nil {
						b.Fatal(err)
					}
					o.Cache = c
				}
				runtime.GC()
				load.reset()
				conns.Store(0)
				cpu0 := processCPU()
				start := time.Now()
				sum, err := bench.Run(context.Background(), o)
				el := time.Since(start)
				cpu := processCPU() - cpu0
				if err != nil {
					b.Fatal(err)
				}
				if err := o.Cache.Close(); err != nil {
					b.Fatal(err)
				}
				if cacheOn && sum.CacheMisses != samples {
					b.Fatalf("cache misses %d, want %d (one per sample)", sum.CacheMisses, samples)
				}
				if sum.Done != samples || len(sum.Failed) != 0 {
					b.Fatalf("summary %+v", sum)
				}
				if pairwise && (sum.Report == nil || sum.Report.Pair == nil || sum.Report.Pair.Overall.Judgments != 2*samples) {
					b.Fatalf("pairwise report %+v", sum.Report)
				}
				perSample := cpu / samples
				b.ReportMetric(floor.Seconds()/el.Seconds(), "x_floor")
				b.ReportMetric(float64(perSample.Microseconds())/1000, "cpu_ms/sample")
				b.ReportMetric(float64(ideal.Microseconds())/1000, "ideal_cpu_ms/sample")
				avg, first := load.average()
				b.ReportMetric(avg, "in_flight")
				b.ReportMetric(float64(conns.Load()), "connections")
				b.Logf("%d samples (%.0f KB/row), %d in flight, %s/call, %s: elapsed %s = %.1f× the sequential floor %s (%d calls per sample; goal ≥ 50×); CPU %s/sample, ideal %s/sample (%.1f×); at the endpoint %.1f in flight on average over %d connections, the first request after %s",
					samples, float64(size)/samples/1024, concurrency, latency, variant, el.Round(time.Millisecond), floor.Seconds()/el.Seconds(), floor, calls,
					perSample.Round(10*time.Microsecond), ideal.Round(10*time.Microsecond), float64(perSample)/float64(ideal),
					avg, conns.Load(), first.Sub(start).Round(time.Millisecond))
			}
		})
	}
}

// inFlight tracks the requests an endpoint holds, to show whether a
// harness keeps its concurrency busy: the time-weighted mean from the first
// request's arrival to the last answer.
type inFlight struct {
	mu          sync.Mutex
	n           int
	area        float64 // request-seconds
	first, last time.Time
}

func (f *inFlight) change(d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	if f.first.IsZero() {
		f.first, f.last = now, now
	}
	f.area += float64(f.n) * now.Sub(f.last).Seconds()
	f.n += d
	f.last = now
}

func (f *inFlight) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n, f.area, f.first, f.last = 0, 0, time.Time{}, time.Time{}
}

// average returns the mean number in flight and when the first request came.
func (f *inFlight) average() (float64, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if span := f.last.Sub(f.first).Seconds(); span > 0 {
		return f.area / span, f.first
	}
	return 0, f.first
}

// writeRealisticData writes n rows over the seven domains shaped like the
// published ones: trajectories of 8 turns, every row carrying the whole
// trajectory (about 185 KB), rows of one trajectory differing in turn_idx.
// Texts hold newlines, quotes, markup, non-ASCII and U+2028, so decoding
// and encoding pay for escapes as they do on the real set. It returns the
// bytes written.
func writeRealisticData(b *testing.B, dir string, n int) int64 {
	domains := []string{"android", "mcp", "os", "search", "swe", "terminal", "web"}
	const turns = 8
	var size int64
	chunk := "drwxr-xr-x 2 root root 4096 \"src\" <div class='x'>ünïcødé 数据\u2028</div>\tdone\n"
	for di, d := range domains {
		f, err := os.Create(filepath.Join(dir, d+"_test.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriter(f)
		for i := di; i < n; i += len(domains) {
			traj := i / turns
			prompts := make([]string, turns)
			responses := make([]string, turns)
			for t := range turns {
				prompts[t] = fmt.Sprintf("### Turn %d\n**Action:**\nACTION-%d-%d %s", t+1, traj, t+1, strings.Repeat(chunk, 30))
				responses[t] = fmt.Sprintf("**Environment Observation:**\nOBS-%d-%d\n%s", traj, t+1, strings.Repeat(chunk, 190))
			}
			rec := map[string]any{"task": "bench/" + d, "id": traj, "prompt": prompts, "response": responses,
				"current_prompt": prompts[i%turns], "system_str": "You simulate " + d + ". " + strings.Repeat(chunk, 20),
				"turn_idx": 1 + i%turns, "total_turns": turns}
			line, _ := json.Marshal(rec)
			size += int64(len(line)) + 1
			w.Write(append(line, '\n'))
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	return size
}

// idealCPU is the CPU per row of the least any Go harness does with a row:
// decode it once into plain strings and encode one request body from it.
func idealCPU(b *testing.B, dir string) time.Duration {
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.jsonl"))
	type row struct {
		Prompt, Response []string
		SystemStr        string `json:"system_str"`
		TurnIdx          int    `json:"turn_idx"`
	}
	rows := 0
	runtime.GC()
	cpu0 := processCPU()
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<26)
		for sc.Scan() {
			var r row
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				b.Fatal(err)
			}
			msgs := []worldmodel.Message{{Role: "system", Content: r.SystemStr}}
			for k := 0; k < r.TurnIdx-1; k++ {
				msgs = append(msgs, worldmodel.Message{Role: "user", Content: r.Prompt[k]}, worldmodel.Message{Role: "assistant", Content: r.Response[k]})
			}
			msgs = append(msgs, worldmodel.Message{Role: "user", Content: r.Prompt[r.TurnIdx-1]})
			if _, err := json.Marshal(map[string]any{"model": "wm", "messages": msgs}); err != nil {
				b.Fatal(err)
			}
			rows++
		}
		f.Close()
	}
	return (processCPU() - cpu0) / time.Duration(rows)
}

// processCPU is the user plus system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
