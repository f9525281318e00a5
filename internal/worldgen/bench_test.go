package worldgen

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

var (
	benchWorlds   = flag.Int("worldgen.worlds", 1000, "worlds BenchmarkGenerate generates")
	benchGenDelay = flag.Duration("worldgen.gen-delay", 10*time.Second, "BenchmarkGenerate's generator latency")
	benchWMDelay  = flag.Duration("worldgen.wm-delay", time.Second, "BenchmarkGenerate's world-model latency per step")
)

// benchGenerator emits a distinct tracker world per candidate with
// tasksPer tasks, each closing its own issue.
func benchGenerator(delay time.Duration, tasksPer int) fakellm.Handler {
	return func(r *fakellm.Request) fakellm.Reply {
		n := variationRE.FindStringSubmatch(r.Messages[len(r.Messages)-1].Content)[1]
		var tasks []any
		for k := 1; k <= tasksPer; k++ {
			key := fmt.Sprintf("WS-%d", k)
			tasks = append(tasks, map[string]any{"instruction": fmt.Sprintf("Close %s of board %s.", key, n), "difficulty": "medium",
				"check":     map[string]any{"state": []any{map[string]any{"entity": key, "attribute": "status", "value": "closed"}}},
				"reference": []any{map[string]any{"name": "close_issue", "arguments": map[string]any{"key": key}}, "done"}})
		}
		out := mustJSON(map[string]any{"world": trackerWorld("tracker", "Board "+n+": issues WS-1 to WS-10 are open."), "tasks": tasks})
		return fakellm.Reply{Content: out, Delay: delay, PromptTokens: 900, CompletionTokens: len(out) / 4}
	}
}

// benchWorldModel closes the issue a close_issue call names after delay.
func benchWorldModel(delay time.Duration, steps *atomic.Int64) fakellm.Handler {
	keyRE := regexp.MustCompile(`"key":"(WS-\d+)"`)
	return func(r *fakellm.Request) fakellm.Reply {
		steps.Add(1)
		obs := `{"error": "invalid arguments"}`
		if m := keyRE.FindStringSubmatch(r.Messages[len(r.Messages)-1].Content); m != nil {
			obs = fmt.Sprintf(`{"issue": {"id": %q, "status": "closed"}}`, m[1])
		}
		return fakellm.Reply{Content: "<predicted_observation>" + obs + "</predicted_observation>", Delay: delay}
	}
}

// BenchmarkGenerate generates and validates 1,000 worlds with 10 tasks
// each (10,000 tasks) against a fake generator and a fake world model
// that take fixed latencies, and prints the time per world against the
// ideal at the configured concurrency. The ideal is the longest of: every
// generator call at Concurrency in flight; every world-model step (counted
// at the fake server, not assumed) at Episodes in flight; one candidate's
// critical path (its generator call, then a reference step, then a random
// agent's two steps). It also samples the heap while it runs, after a run
// of a quarter as many worlds, so one can see the peak is set by the work
// in flight rather than the library's size. The default latencies (10 s
// per generator answer, 1 s per world-model step) are a served model's;
// at much shorter ones the ladder's CPU, not the latencies, sets the pace
// on a small machine (the CPU line says how much the process got).
//
//	go test -run '^$' -bench Generate -benchtime 1x ./internal/worldgen [-args -worldgen.worlds=N -worldgen.gen-delay=D -worldgen.wm-delay=D]
func BenchmarkGenerate(b *testing.B) {
	genDelay, wmDelay := *benchGenDelay, *benchWMDelay
	const (
		tasksPer    = 10
		concurrency = 64
		episodes    = 128
	)
	worlds := *benchWorlds
	for range b.N {
		small := measure(b, worlds/4, genDelay, wmDelay, tasksPer, concurrency, episodes)
		big := measure(b, worlds, genDelay, wmDelay, tasksPer, concurrency, episodes)
		b.ReportMetric(big.ratio, "x-ideal")
		b.ReportMetric(float64(big.peak)/1e6, "peak-heap-MB")
		fmt.Printf("worldgen: %d worlds (%d tasks) in %v at concurrency %d candidates / %d episodes: %.2f ms per world, ideal %.2f ms (ratio %.2f, goal <= 1.2); %d world-model steps; %d CPUs\n",
			big.worlds, big.tasks, big.elapsed.Round(time.Millisecond), concurrency, episodes, big.perWorld, big.ideal, big.ratio, big.steps, runtime.NumCPU())
		fmt.Printf("worldgen: CPU %v over %v of wall time (%.0f%% of one core; %.2f ms CPU per world-model step, fakes included): a ratio above 1.2 with little CPU share is the machine's, not the pipeline's\n",
			big.cpu.Round(time.Millisecond), big.elapsed.Round(time.Millisecond), 100*big.cpu.Seconds()/big.elapsed.Seconds(), float64(big.cpu.Milliseconds())/float64(max(big.steps, 1)))
		fmt.Printf("worldgen: peak heap %.1f MB for %d worlds, %.1f MB for %d: the work in flight sets it, not the library\n",
			float64(small.peak)/1e6, small.worlds, float64(big.peak)/1e6, big.worlds)
	}
}

type benchResult struct {
	worlds, tasks   int
	elapsed         time.Duration
	steps           int64
	perWorld, ideal float64 // ms
	ratio           float64
	peak            uint64
	cpu             time.Duration // this process's CPU time (the fake servers' included)
}

func measure(b *testing.B, worlds int, genDelay, wmDelay time.Duration, tasksPer, concurrency, episodes int) benchResult {
	var steps atomic.Int64
	gen, wm := fakellm.New(benchGenerator(genDelay, tasksPer)), fakellm.New(benchWorldModel(wmDelay, &steps))
	defer gen.Close()
	defer wm.Close()
	o := Options{
		Count:     worlds,
		Generator: worldmodel.New(gen.URL, "gen", &worldmodel.Options{MaxRetries: -1}), GeneratorModel: "gen",
		WorldModel:  worldmodel.New(wm.URL, "wm", &worldmodel.Options{MaxRetries: -1}),
		Concurrency: concurrency, Episodes: episodes, Domains: []string{"mcp"}, Seed: 1, TasksPerWorld: tasksPer,
	}
	dir := filepath.Join(b.TempDir(), "lib")
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			gen.Reset() // the fake servers' request logs are not ours to count
			wm.Reset()
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	start, cpu0 := time.Now(), testkit.CPUTime()
	st, err := Run(context.Background(), dir, o)
	elapsed := time.Since(start)
	cpu := testkit.CPUTime() - cpu0
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	if st.AcceptedWorlds != worlds || st.AcceptedTasks != worlds*tasksPer {
		b.Fatalf("accepted %d worlds, %d tasks of %d", st.AcceptedWorlds, st.AcceptedTasks, worlds)
	}
	ideal := max(time.Duration(worlds)*genDelay/time.Duration(concurrency),
		time.Duration(steps.Load())*wmDelay/time.Duration(episodes),
		genDelay+3*wmDelay)
	r := benchResult{worlds: worlds, tasks: st.AcceptedTasks, elapsed: elapsed, steps: steps.Load(), peak: peak.Load(), cpu: cpu}
	r.perWorld = float64(elapsed) / float64(worlds) / 1e6
	r.ideal = float64(ideal) / float64(worlds) / 1e6
	r.ratio = r.perWorld / r.ideal
	return r
}
