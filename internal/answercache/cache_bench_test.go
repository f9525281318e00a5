package answercache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// BenchmarkCachePut is the cost of storing one small answer (the size of a
// judge verdict) in a fresh cache, the price every miss of a cached run pays
// on top of its call.
//
//	go test -run '^$' -bench CachePut ./internal/bench
func BenchmarkCachePut(b *testing.B) {
	c, err := answercache.OpenCache(b.TempDir(), nil)
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
	c, err := answercache.OpenCache(dir, nil)
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
		c, err := answercache.OpenCache(dir, nil)
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

// BenchmarkCacheCompact compacts a cache of 100,000 answers (judge-sized,
// ~400 bytes a line) left in 32 segments by racing runs, one answer in ten
// stored twice, and prints the time beside that of opening the same
// directory, measured in the same run: compaction reads what opening
// reads, and writes it once more.
//
//	go test -run '^$' -bench CacheCompact -benchtime 3x ./internal/bench
func BenchmarkCacheCompact(b *testing.B) {
	const answers, segs = 100_000, 32
	src := b.TempDir()
	resp := &worldmodel.Response{Content: "SCORES 4 4 4 4 4\nStrengths: the listing matches the directory.\nWeaknesses: none that matter.",
		FinishReason: "stop", Model: "judge", PromptTokens: 1200, CompletionTokens: 30, LatencyMS: 100}
	body, err := json.Marshal(resp)
	if err != nil {
		b.Fatal(err)
	}
	var files [segs][]byte
	for i := range answers {
		line := append(append([]byte(`{"k":"`+hexKey(fmt.Sprint("request ", i))+`","r":`), body...), "}\n"...)
		files[i%segs] = append(files[i%segs], line...)
		if i%10 == 0 {
			files[(i+1)%segs] = append(files[(i+1)%segs], line...)
		}
	}
	var size int64
	for s, content := range files {
		writeSegment(b, src, s, string(content))
		size += int64(len(content))
	}
	fill := func() string {
		dir := filepath.Join(b.TempDir(), "cache")
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			b.Fatal(err)
		}
		return dir
	}
	var openTotal, compactTotal time.Duration
	for range b.N {
		b.StopTimer()
		dir := fill()
		start := time.Now()
		c, err := answercache.OpenCache(dir, &answercache.CacheOptions{CompactAt: -1})
		if err != nil {
			b.Fatal(err)
		}
		openTotal += time.Since(start)
		c.Close()
		b.StartTimer()
		start = time.Now()
		st, err := answercache.CompactCache(context.Background(), dir, nil)
		compactTotal += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if st.Kept != answers || st.Duplicates != answers/10 || st.Segments != segs {
			b.Fatalf("compacted %+v", st)
		}
	}
	b.ReportMetric(float64(compactTotal.Milliseconds())/float64(b.N), "compact_ms")
	b.ReportMetric(float64(openTotal.Milliseconds())/float64(b.N), "open_ms")
	b.ReportMetric(float64(compactTotal)/float64(openTotal), "compact/open")
	b.ReportMetric(float64(size)/(1<<20)/(compactTotal.Seconds()/float64(b.N)), "MiB/s")
}
