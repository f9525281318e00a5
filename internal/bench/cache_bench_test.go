package bench_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// BenchmarkCachePut is the cost of storing one small answer (the size of a
// judge verdict) in a fresh cache, the price every miss of a cached run pays
// on top of its call.
//
//	go test -run '^$' -bench CachePut ./internal/bench
func BenchmarkCachePut(b *testing.B) {
	c, err := bench.OpenCache(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = hexKey(fmt.Sprint("request ", i))
	}
	resp := &worldmodel.Response{Content: "SCORES 4 4 4 4 4\nStrengths: the listing matches.\nWeaknesses: none.",
		FinishReason: "stop", Model: "judge", PromptTokens: 1200, CompletionTokens: 30, LatencyMS: 100}
	b.ResetTimer()
	for i := range b.N {
		c.Put(keys[i], resp)
	}
}

// BenchmarkCacheOpen indexes a cache of 100,000 answers written by earlier
// runs and prints the time to open it and the memory its index holds per
// answer.
//
//	go test -run '^$' -bench CacheOpen -benchtime 3x ./internal/bench
func BenchmarkCacheOpen(b *testing.B) {
	const answers = 100_000
	dir := b.TempDir()
	c, err := bench.OpenCache(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp := &worldmodel.Response{Content: "SCORES 4 4 4 4 4", FinishReason: "stop", Model: "judge"}
	for i := range answers {
		c.Put(hexKey(fmt.Sprint("request ", i)), resp)
	}
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		c, err := bench.OpenCache(dir, nil)
		el := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/answers, "index_B/answer")
		b.ReportMetric(float64(el.Microseconds())/1000, "open_ms")
		runtime.KeepAlive(c)
		c.Close()
	}
}
