package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// recordingModel answers instantly with observations of random length and
// keeps every request's transcript per session.
type recordingModel struct {
	mu   sync.Mutex
	seen map[string][][]byte
	rng  *rand.Rand
}

func (m *recordingModel) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := worldmodel.Affinity(ctx)
	m.seen[k] = append(m.seen[k], RenderTranscript(req.Messages))
	obs := strings.Repeat("line of terminal output\n", 1+m.rng.IntN(40))
	return &worldmodel.Response{Content: "<think>x</think><predicted_observation>" + obs + "</predicted_observation>", FinishReason: "stop"}, nil
}

type prefixStats struct {
	pairs, stable, cuts, breaks int
}

// runPrefix drives sessions of 20-40 turns with a context budget small
// enough to force truncation cuts, random control text (as perturbation
// rules add) and world-state text, and checks that every request is a
// byte-prefix extension of the previous one of its session unless a cut
// happened in between.
func runPrefix(t testing.TB, sessions int) prefixStats {
	spec := &world.Spec{Name: "t", Domain: "terminal", TaskDescription: "a shell", ActionSpace: world.ActionSpace{Description: "keystrokes"}, InitialState: "$ "}
	model := &recordingModel{seen: map[string][][]byte{}, rng: rand.New(rand.NewPCG(1, 2))}
	m := New(&Options{
		Worlds:   map[string]*world.Spec{"t": spec},
		Backends: map[string]BackendFactory{BackendModel: NewModelBackend(model, &ModelOptions{ContextBudget: 12000, MaxTokens: 4000})},
		MaxTurns: 1000,
	})
	defer m.Close(context.Background())
	rng := rand.New(rand.NewPCG(3, 4))
	var st prefixStats
	ctx := context.Background()
	for s := 0; s < sessions; s++ {
		rep, err := m.Create(ctx, CreateRequest{WorldID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		turns := 20 + rng.IntN(21)
		var cuts []int
		for i := 1; i <= turns; i++ {
			req := StepRequest{Action: json.RawMessage(fmt.Sprintf(`[{"keystrokes":"cmd %d %s\n","duration":1}]`, i, strings.Repeat("x", rng.IntN(200))))}
			if rng.IntN(5) == 0 {
				req.Control = "Simulate a transient failure of this command."
			}
			if rng.IntN(7) == 0 {
				req.WorldState = "disk usage: 71%"
			}
			r, err := m.Step(ctx, rep.SessionID, req)
			if err != nil {
				t.Fatal(err)
			}
			if r.Info.PrefixBreak {
				st.breaks++
			}
			cuts = append(cuts, r.Info.HistoryCut)
		}
		reqs := model.seen[rep.SessionID]
		if len(reqs) != turns {
			t.Fatalf("session %d: %d requests for %d turns", s, len(reqs), turns)
		}
		for i := 1; i < len(reqs); i++ {
			if cuts[i] != cuts[i-1] {
				st.cuts++
				continue
			}
			st.pairs++
			if bytes.HasPrefix(reqs[i], reqs[i-1]) {
				st.stable++
			}
		}
	}
	return st
}

func TestPrefixStability(t *testing.T) {
	st := runPrefix(t, 40)
	if st.cuts == 0 {
		t.Fatal("the budget never forced a cut; the test does not exercise truncation")
	}
	if st.stable != st.pairs || st.breaks != 0 {
		t.Fatalf("%d of %d consecutive requests were prefix extensions (%d cuts, %d reported breaks)", st.stable, st.pairs, st.cuts, st.breaks)
	}
}

// BenchmarkPrefixStability is the performance goal (b): over 1,000
// sessions of 20-40 turns, 100% of consecutive requests between
// truncation cuts are byte-prefix extensions.
func BenchmarkPrefixStability(b *testing.B) {
	for i := 0; i < b.N; i++ {
		st := runPrefix(b, 1000)
		ratio := float64(st.stable) / float64(st.pairs)
		b.ReportMetric(100*ratio, "pct_prefix_stable")
		b.ReportMetric(float64(st.cuts), "cuts")
		b.Logf("1000 sessions: %d/%d consecutive request pairs between cuts are byte-prefix extensions (%.2f%%), %d truncation cuts, %d reported breaks",
			st.stable, st.pairs, 100*ratio, st.cuts, st.breaks)
	}
}
