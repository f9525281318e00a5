package bench_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

func BenchmarkZZTimeline(b *testing.B) {
	var mu sync.Mutex
	var arr, dep []time.Duration
	var t0 time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arr = append(arr, time.Since(t0))
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(100 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"wm","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"<predicted_observation>ok</predicted_observation>"}}],"usage":{"prompt_tokens":40000,"completion_tokens":9}}`)
		mu.Lock()
		dep = append(dep, time.Since(t0))
		mu.Unlock()
	}))
	defer srv.Close()
	data := b.TempDir()
	writeRealisticData(b, data, 840)
	for _, j := range []string{"none", "rules"} {
		arr, dep = nil, nil
		o := &bench.Options{Data: data, Out: b.TempDir(), Concurrency: 64, ModelName: "wm",
			Model: worldmodel.New(srv.URL, "wm", &worldmodel.Options{HTTPClient: transportPool{}.client(64)})}
		if j == "rules" {
			o.Rules = judge.RuleScorer{}
		}
		t0 = time.Now()
		_, err := bench.Run(context.Background(), o)
		el := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		sort.Slice(arr, func(i, k int) bool { return arr[i] < arr[k] })
		sort.Slice(dep, func(i, k int) bool { return dep[i] < dep[k] })
		// in-flight integral
		var area float64
		for i := range arr {
			_ = i
		}
		for _, d := range dep {
			area += d.Seconds()
		}
		for _, a := range arr {
			area -= a.Seconds()
		}
		b.Logf("%s: total %s first req %s, 64th req %s, last req %s, last resp %s, avg in flight %.1f (over first..last resp)",
			j, el.Round(time.Millisecond), arr[0].Round(time.Millisecond), arr[63].Round(time.Millisecond), arr[len(arr)-1].Round(time.Millisecond), dep[len(dep)-1].Round(time.Millisecond),
			area/(dep[len(dep)-1]-arr[0]).Seconds())
	}
}
