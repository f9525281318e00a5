package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/worldmodel"
	"github.com/agentworld/agentworld/internal/worldmodel/fakellm"
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
