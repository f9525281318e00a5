package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/world"
)

// overheadMode is one way [Run] drives a group in BenchmarkStepOverhead.
type overheadMode struct {
	name string
	// inFlight is Run's MaxInFlight and the direct loop's concurrency.
	inFlight int
	// branchAt is Run's BranchAt; the direct loop builds the same tree.
	branchAt int
}

// BenchmarkStepOverhead compares a run of 4 tasks × 8 episodes of 20
// steps by [Run] (resets, forks, journal, summary) with the same run made
// by a bare loop that calls the same fake policy server and the same
// simulator the same number of times, with the same bound on episodes in
// flight: per task one reset, one fork per member (and one for a tree's
// trunk), per step a POST of the request a caller would build with
// json.Marshal and a decode of its message, then Manager.Step, and a close
// of every session. The two sides run one after the other in each
// iteration, in alternating order so that drift in the machine's load hits
// both, each after a GC so that neither pays for collecting the other's
// garbage, in one process with the same fakes, which answer at once: the
// ratio is an upper bound on the driver's share of a real step, where the
// policy takes far longer. What Run pays once per run (opening and
// fsyncing its journal, the summary file) is spread over the run's steps,
// here 640 (360 in a tree). Each mode reports wall time and process CPU
// time (user + system, the fakes' included on both sides) per step and
// their ratios, and the median of the iterations' wall ratios. Goal:
// overhead_ratio ≤ 1.2 in every mode.
func BenchmarkStepOverhead(b *testing.B) {
	for _, mode := range []overheadMode{
		{name: "sequential", inFlight: 1},
		{name: "parallel", inFlight: 8},
		{name: "tree", inFlight: 8, branchAt: 10},
	} {
		b.Run(mode.name, func(b *testing.B) { benchOverhead(b, mode) })
	}
}

func benchOverhead(b *testing.B, mode overheadMode) {
	const tasks, steps, group = 4, 20, 8
	m, _ := newFakeWorld(b, true)
	pol := newFakePolicy(b, func([]Message) string { return `{"key":"WS-3"}` })
	pol.forget = true
	spec, _ := m.World("tracker")
	ctx := context.Background()
	root := b.TempDir()
	ts := make([]Task, tasks)
	for k := range ts {
		ts[k] = Task{ID: fmt.Sprint("t", k), World: "tracker", MaxTurns: steps}
	}
	d := &directLoop{m: m, url: pol.srv.URL + "/v1/chat/completions", spec: spec, tools: agentTools(spec), steps: steps, group: group, mode: mode}
	var driver, direct, driverCPU, directCPU time.Duration
	var pairs []float64 // each iteration's wall ratio
	i := 0
	for b.Loop() {
		i++
		dir := filepath.Join(root, fmt.Sprint(i))
		before := [2]time.Duration{driver, direct}
		runDriver := func() {
			runtime.GC() // each side starts on a collected heap
			t0, c0 := time.Now(), testkit.CPUTime()
			res, err := Run(ctx, Embedded{M: m}, ts, dir, &Options{
				Policy: &Policy{URL: pol.srv.URL + "/v1", Model: "pol"}, GroupSize: group,
				MaxInFlight: mode.inFlight, BranchAt: mode.branchAt,
			})
			driver += time.Since(t0)
			driverCPU += testkit.CPUTime() - c0
			if err != nil || res.Done != tasks*group {
				b.Fatalf("run: %v %+v", err, res)
			}
		}
		runDirect := func() {
			runtime.GC()
			t0, c0 := time.Now(), testkit.CPUTime()
			d.run(b, ctx, ts)
			direct += time.Since(t0)
			directCPU += testkit.CPUTime() - c0
		}
		if i%2 == 0 {
			runDriver()
			runDirect()
		} else {
			runDirect()
			runDriver()
		}
		pairs = append(pairs, float64(driver-before[0])/float64(direct-before[1]))
	}
	perRun := tasks * stepsPerGroup(mode, steps, group)
	if n := pol.count.Load(); n != int64(2*i*perRun) {
		b.Fatalf("policy got %d requests, want %d per side", n, i*perRun)
	}
	n := float64(i * perRun)
	b.ReportMetric(float64(driver.Nanoseconds())/n, "driver_ns/step")
	b.ReportMetric(float64(direct.Nanoseconds())/n, "direct_ns/step")
	b.ReportMetric(float64(driverCPU.Nanoseconds())/n, "driver_cpu_ns/step")
	b.ReportMetric(float64(directCPU.Nanoseconds())/n, "direct_cpu_ns/step")
	b.ReportMetric(float64(driver)/float64(direct), "overhead_ratio")
	// The median of the iterations' ratios: a burst of load from another
	// process during one side of one iteration moves it less.
	slices.Sort(pairs)
	b.ReportMetric(pairs[len(pairs)/2], "overhead_ratio_p50")
	b.ReportMetric(float64(driverCPU)/float64(directCPU), "cpu_ratio")
}

// stepsPerGroup is the policy calls (and simulator steps) of one group:
// every member's, or in a tree the trunk's once and then each member's
// after the branch.
func stepsPerGroup(mode overheadMode, steps, group int) int {
	if mode.branchAt > 0 {
		return mode.branchAt + group*(steps-mode.branchAt)
	}
	return group * steps
}

// directLoop is the bare loop [Run] is measured against: it calls the
// policy and the simulator as a caller with no driver would, in groups of
// the mode's shape.
type directLoop struct {
	m     *sim.Manager
	url   string
	spec  *world.Spec
	tools []tool
	steps int
	group int
	mode  overheadMode
}

// run runs every task's group with at most mode.inFlight episodes (a
// tree's trunk among them) at once.
func (d *directLoop) run(b *testing.B, ctx context.Context, tasks []Task) {
	sem := make(chan struct{}, d.mode.inFlight)
	var wg sync.WaitGroup
	for _, t := range tasks {
		root, err := d.m.Create(ctx, sim.CreateRequest{WorldID: t.World})
		if err != nil {
			b.Fatal(err)
		}
		first := firstMessages(d.spec, t, root.Observation)
		if d.mode.branchAt == 0 {
			d.members(b, ctx, root.SessionID, first, 0, sem, &wg)
			d.m.Delete(ctx, root.SessionID)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			trunk := d.fork(b, ctx, root.SessionID)
			d.m.Delete(ctx, root.SessionID)
			msgs := d.turns(b, ctx, trunk, first, 1, d.mode.branchAt)
			<-sem
			var mine sync.WaitGroup
			d.members(b, ctx, trunk, msgs, d.mode.branchAt, sem, &mine)
			mine.Wait()
			d.m.Delete(ctx, trunk)
		})
	}
	wg.Wait()
}

// members forks the group's members from a session that has taken its
// first done turns and runs each in a goroutine holding a slot of sem.
func (d *directLoop) members(b *testing.B, ctx context.Context, from string, msgs []Message, done int, sem chan struct{}, wg *sync.WaitGroup) {
	for range d.group {
		id := d.fork(b, ctx, from)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d.turns(b, ctx, id, append([]Message(nil), msgs...), done+1, d.steps)
			d.m.Delete(ctx, id)
		})
	}
}
func (d *directLoop) fork(b *testing.B, ctx context.Context, id string) string {
	f, err := d.m.Fork(ctx, id, sim.ForkRequest{})
	if err != nil {
		b.Error(err)
		return ""
	}
	return f.SessionID
}

// turns runs policy turns first..last on a session and returns the
// history.
func (d *directLoop) turns(b *testing.B, ctx context.Context, id string, msgs []Message, first, last int) []Message {
	for turn := first; turn <= last; turn++ {
		body, _ := json.Marshal(map[string]any{"model": "pol", "messages": msgs, "tools": d.tools, "logprobs": true, "return_token_ids": true})
		resp, err := policyClient.Post(d.url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Error(err)
			return msgs
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var c struct {
			Choices []struct {
				Message Message `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(raw, &c); err != nil || len(c.Choices) == 0 || len(c.Choices[0].Message.ToolCalls) == 0 {
			b.Errorf("policy answer %s: %v", raw, err)
			return msgs
		}
		tc := c.Choices[0].Message.ToolCalls[0]
		action, _ := json.Marshal(map[string]any{"name": tc.Function.Name, "arguments": json.RawMessage(tc.Function.Arguments)})
		res, err := d.m.Step(ctx, id, sim.StepRequest{Action: action, Turn: turn})
		if err != nil {
			b.Error(err)
			return msgs
		}
		msgs = append(msgs, c.Choices[0].Message, Message{Role: "tool", ToolCallID: tc.ID, Content: res.Observation})
	}
	return msgs
}

// BenchmarkInFlight512 runs 64 and then 128 tasks × G=8 with up to 512
// episodes in flight against fakes that keep nothing (the policy answers
// after 100 ms, so the episodes overlap), after one unmeasured run that
// opens the connections the later ones reuse. Any failed episode fails the
// benchmark. It reports the most policy requests seen at once, the peak of
// the live heap above its level before each run ([liveHeapGrowth]), and
// the ratio of that peak at 128 tasks to the peak at 64: near 1 when
// memory is bounded by the episodes in flight, near 2 when it grows with
// the episodes run.
func BenchmarkInFlight512(b *testing.B) {
	m, _ := newFakeWorld(b, true)
	var cur, peak atomic.Int64
	pol := newFakePolicy(b, func(msgs []Message) string {
		n := cur.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(100 * time.Millisecond)
		cur.Add(-1)
		return byInstruction(msgs)
	})
	pol.forget = true
	root := b.TempDir()
	i := 0
	run := func(tasks int) {
		i++
		res, err := Run(context.Background(), Embedded{M: m}, issueTasks(tasks), filepath.Join(root, fmt.Sprint(i)), &Options{
			Policy: &Policy{URL: pol.srv.URL + "/v1", Model: "pol"}, GroupSize: 8, MaxInFlight: 512,
		})
		if err != nil || res.Done != tasks*8 || res.Failed != 0 {
			b.Fatalf("%d tasks: %v %+v", tasks, err, res)
		}
	}
	run(64)
	var live [2]uint64
	for b.Loop() {
		for k, tasks := range []int{64, 128} {
			live[k] = max(live[k], liveHeapGrowth(func() { run(tasks) }))
		}
	}
	if n := pol.count.Load(); n != int64(2*8*(64+i/2*(64+128))) {
		b.Fatalf("policy got %d requests, want 2 per episode", n)
	}
	b.ReportMetric(float64(peak.Load()), "peak_policy_requests")
	b.ReportMetric(float64(live[0])/(1<<20), "live_heap_MB_64tasks")
	b.ReportMetric(float64(live[1])/(1<<20), "live_heap_MB_128tasks")
	b.ReportMetric(float64(live[1])/float64(live[0]), "heap_ratio_128_64")
}

// liveHeapGrowth runs f and returns how far the live heap rose above its
// level before f: every 10 ms it collects garbage and reads what is left,
// so the figure is what f holds, not garbage waiting for a collection (and
// a hold shorter than 10 ms may be missed).
func liveHeapGrowth(f func()) uint64 {
	live := func() uint64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	base := live()
	peak := base
	done := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				peak = max(peak, live())
			}
		}
	})
	f()
	close(done)
	sampler.Wait()
	return peak - base
}
