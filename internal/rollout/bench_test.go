package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/worldmodel/fakellm"
)

// BenchmarkStepOverhead compares a group of 8 episodes of 20 steps run by
// [Run] one at a time (reset, forks, journal, summary) with the same 160
// policy calls and simulator steps made directly in a bare loop: a raw
// POST of the same request, its answer decoded, Manager.Step. Both talk to the same fake
// policy and fake world model, which answer at once, so the ratio is an
// upper bound on the driver's share of a real step. Goal: overhead_ratio
// ≤ 1.2.
func BenchmarkStepOverhead(b *testing.B) {
	const steps, group = 20, 8
	m, _ := fakeWorld(b)
	pol := newFakePolicy(b, func([]Message) string { return `{"key":"WS-3"}` })
	spec, _ := m.World("tracker")
	tools := agentTools(spec)
	ctx := context.Background()
	root := b.TempDir()
	var driver, direct time.Duration
	i := 0
	for b.Loop() {
		i++
		dir := filepath.Join(root, fmt.Sprint(i))
		runDriver := func() {
			t0 := time.Now()
			res, err := Run(ctx, Embedded{M: m}, []Task{{ID: "t", World: "tracker", MaxTurns: steps}}, dir, &Options{
				Policy: &Policy{URL: pol.srv.URL + "/v1", Model: "pol"}, GroupSize: group, MaxInFlight: 1,
			})
			driver += time.Since(t0)
			if err != nil || res.Done != group {
				b.Fatalf("run: %v %+v", err, res)
			}
		}
		runDirect := func() {
			t0 := time.Now()
			for range group {
				directEpisode(b, ctx, m, pol.srv.URL+"/v1/chat/completions", tools, steps)
			}
			direct += time.Since(t0)
		}
		// Alternate the order so drift in the machine's load hits both.
		if i%2 == 0 {
			runDriver()
			runDirect()
		} else {
			runDirect()
			runDriver()
		}
	}
	n := float64(i * steps * group)
	b.ReportMetric(float64(driver.Nanoseconds())/n, "driver_ns/step")
	b.ReportMetric(float64(direct.Nanoseconds())/n, "direct_ns/step")
	b.ReportMetric(float64(driver)/float64(direct), "overhead_ratio")
}

// directEpisode is the bare loop the driver is measured against.
func directEpisode(b *testing.B, ctx context.Context, m *sim.Manager, url string, tools []tool, steps int) {
	rep, err := m.Create(ctx, sim.CreateRequest{WorldID: "tracker"})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Delete(ctx, rep.SessionID)
	spec, _ := m.World("tracker")
	msgs := firstMessages(spec, Task{ID: "t", World: "tracker"}, rep.Observation)
	for turn := 1; turn <= steps; turn++ {
		body, _ := json.Marshal(map[string]any{"model": "pol", "messages": msgs, "tools": tools, "logprobs": true, "return_token_ids": true})
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var c struct {
			Choices []struct {
				Message Message `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(raw, &c); err != nil || len(c.Choices) == 0 || len(c.Choices[0].Message.ToolCalls) == 0 {
			b.Fatalf("policy answer %s: %v", raw, err)
		}
		tc := c.Choices[0].Message.ToolCalls[0]
		action, _ := json.Marshal(map[string]any{"name": tc.Function.Name, "arguments": json.RawMessage(tc.Function.Arguments)})
		res, err := m.Step(ctx, rep.SessionID, sim.StepRequest{Action: action, Turn: turn})
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, c.Choices[0].Message, Message{Role: "tool", ToolCallID: tc.ID, Content: res.Observation})
	}
}

// BenchmarkInFlight512 runs 64 and then 128 tasks × G=8 with 512 episodes
// in flight at once against fakes (the policy answers after 50 ms, so the
// episodes overlap): no episode may fail; each size reports the most
// policy requests seen at once and how far the heap rose above its start,
// which should not grow with the number of tasks.
func BenchmarkInFlight512(b *testing.B) {
	for _, tasks := range []int{64, 128} {
		b.Run(fmt.Sprintf("tasks=%d", tasks), func(b *testing.B) {
			m, _ := fakeWorld(b)
			var cur, peak atomic.Int64
			pol := newFakePolicy(b, func(msgs []Message) string {
				n := cur.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(50 * time.Millisecond)
				cur.Add(-1)
				return byInstruction(msgs)
			})
			root := b.TempDir()
			var heap uint64
			i := 0
			for b.Loop() {
				i++
				dir := filepath.Join(root, fmt.Sprint(i))
				heap = max(heap, fakellm.HeapGrowth(func() {
					res, err := Run(context.Background(), Embedded{M: m}, issueTasks(tasks), dir, &Options{
						Policy: &Policy{URL: pol.srv.URL + "/v1", Model: "pol"}, GroupSize: 8, MaxInFlight: 512,
					})
					if err != nil || res.Done != tasks*8 || res.Failed != 0 {
						b.Fatalf("run: %v %+v", err, res)
					}
				}))
			}
			b.ReportMetric(float64(peak.Load()), "peak_policy_requests")
			b.ReportMetric(float64(heap)/(1<<20), "heap_growth_MB")
		})
	}
}
