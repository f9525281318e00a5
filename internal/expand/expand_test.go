package expand_test

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/examples"
	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/trainset"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
)

func loadTrajectories(t *testing.T, path string) []*trajectory.Trajectory {
	t.Helper()
	trajs, err := datapipe.ReadTrajectories(path)
	if err != nil {
		t.Fatal(err)
	}
	return trajs
}

// TestExpandCounts: sft emits the sum of turns; rl exactly one sample per
// trajectory; both are the same for 1 and 3 workers.
func TestExpandCounts(t *testing.T) {
	testkit.NoLeaks(t)
	trajs := loadTrajectories(t, "../datapipe/testdata/small.jsonl")
	turns := 0
	for _, tr := range trajs {
		turns += len(tr.Turns)
	}
	for _, tc := range []struct {
		mode   expand.Mode
		policy expand.Policy
		want   int
	}{{expand.SFT, expand.Uniform, turns}, {expand.RL, expand.Uniform, len(trajs)}, {expand.RL, expand.Weighted, len(trajs)}} {
		var outs []string
		for _, w := range []int{1, 3} {
			var out bytes.Buffer
			sum, err := trainset.Export(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, &out,
				&expand.ExpandOptions{Mode: tc.mode, Policy: tc.policy, Seed: 9}, &trainset.ExportOptions{KeepDuplicates: true}, &datapipe.Options{Workers: w})
			if err != nil {
				t.Fatal(err)
			}
			ss := testkit.DecodeLines[expand.Sample](t, out.Bytes())
			if len(ss) != tc.want || sum.Written != int64(tc.want) {
				t.Fatalf("mode %d policy %d workers %d: %d samples, want %d", tc.mode, tc.policy, w, len(ss), tc.want)
			}
			if tc.mode == expand.RL {
				seen := map[string]bool{}
				for _, s := range ss {
					if seen[s.TrajectoryID] {
						t.Fatalf("two rl samples for %s", s.TrajectoryID)
					}
					seen[s.TrajectoryID] = true
					if len(s.History) != s.Turn-1 {
						t.Fatalf("history %d for turn %d", len(s.History), s.Turn)
					}
				}
			}
			outs = append(outs, out.String())
		}
		if outs[0] != outs[1] {
			t.Errorf("mode %d: output depends on the worker count", tc.mode)
		}
	}
}

// TestExpandSFTShape checks sample k of a trajectory against its turns.
func TestExpandSFTShape(t *testing.T) {
	tr := &trajectory.Trajectory{ID: "x", Domain: "terminal", SystemPrompt: "sys",
		Turns: []trajectory.Turn{{Action: "ls", Observation: "a b c d e f g h i j"}, {Action: "cat a", Observation: "cat a"}}}
	e, err := expand.NewExpander(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*expand.Sample
	if err := e.Expand(tr, func(s *expand.Sample) error { got = append(got, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d samples", len(got))
	}
	s := got[1]
	want := []expand.Message{{"system", "sys"}, {"user", conversation.UserMessage(1, "ls", "", "")}, {"assistant", "**Environment Observation:**\na b c d e f g h i j"}, {"user", conversation.UserMessage(2, "cat a", "", "")}}
	if d := cmp.Diff(want, s.Prompt()); d != "" {
		t.Error(d)
	}
	if got[0].Category != "retrieval" || got[0].Weight != 1 || s.Category != "echo" || s.Weight != 0.05 {
		t.Errorf("categories %s/%v %s/%v", got[0].Category, got[0].Weight, s.Category, s.Weight)
	}
	line := trainset.ChatLineOf(s)
	if n := len(line.Messages); n != 5 || *line.Messages[2].Loss || !*line.Messages[4].Loss || line.Messages[4].Content != "<predicted_observation>\ncat a\n</predicted_observation>" || line.LossWeight != 0.05 {
		t.Errorf("chat line %+v", line)
	}
}

// TestWeightedPolicyPrefersInformativeTurns: with one retrieval turn among
// echoes, the weighted policy picks it far more often than 1/T.
func TestWeightedPolicyPrefersInformativeTurns(t *testing.T) {
	e, err := expand.NewExpander(&expand.ExpandOptions{Mode: expand.RL, Policy: expand.Weighted, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	hits := 0
	const n = 400
	for i := 0; i < n; i++ {
		tr := &trajectory.Trajectory{ID: strings.Repeat("i", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Domain: "search", SystemPrompt: "s"}
		for k := 0; k < 5; k++ {
			tr.Turns = append(tr.Turns, trajectory.Turn{Action: "open page", Observation: "open page"})
		}
		tr.Turns[3] = trajectory.Turn{Action: "q", Observation: "one two three four five six seven eight nine ten"}
		_ = e.Expand(tr, func(s *expand.Sample) error {
			if s.Turn == 4 {
				hits++
			}
			return nil
		})
	}
	// weights 1.0 vs 4 × 0.05 → P = 1/1.2 ≈ 0.83
	if p := float64(hits) / n; math.Abs(p-1/1.2) > 0.08 {
		t.Errorf("retrieval turn chosen %.2f of the time, want ≈0.83", p)
	}
}

// TestSamplesAreWhatTheSimulatorSends pins training samples to serving: for
// a trajectory of an example world, sample k's messages are the request
// `agentworld serve` sends a world model at turn k (system prompt, history
// and newest message, byte for byte), and the target is an answer the
// simulator reads back as the real observation.
func TestSamplesAreWhatTheSimulatorSends(t *testing.T) {
	specs, err := world.LoadFS(examples.FS, "worlds")
	if err != nil {
		t.Fatal(err)
	}
	spec := specs["python-terminal"]
	if spec == nil {
		t.Fatal("example world python-terminal missing")
	}
	c := sim.Components(spec)
	tr := &trajectory.Trajectory{ID: "x", Domain: string(spec.Domain), Components: &c, Turns: []trajectory.Turn{
		{Action: `[{"keystrokes":"ls\n","duration":1}]`, Observation: "README.md  src  tests"},
		{Action: `[{"keystrokes":"cat README.md\n","duration":1}]`, Observation: "# demo\n<b>bold</b>"},
		{Action: `[{"keystrokes":"pytest -q\n","duration":5}]`, Observation: "3 passed in 0.01s"},
	}}
	e, err := expand.NewExpander(nil)
	if err != nil {
		t.Fatal(err)
	}
	var samples []*expand.Sample
	if err := e.Expand(tr, func(s *expand.Sample) error { samples = append(samples, s); return nil }); err != nil {
		t.Fatal(err)
	}
	system, err := sim.SystemPrompt(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		var hist []sim.HistoryTurn
		for i, h := range tr.Turns[:s.Turn-1] {
			hist = append(hist, sim.HistoryTurn{Message: conversation.UserMessage(i+1, h.Action, "", ""), Assistant: conversation.ObservationResponse(h.Observation)})
		}
		var want []expand.Message
		for _, m := range sim.BuildMessages(system, hist, 0, conversation.UserMessage(s.Turn, s.Action, "", "")) {
			want = append(want, expand.Message{Role: m.Role, Content: m.Content})
		}
		if diff := cmp.Diff(want, s.Prompt()); diff != "" {
			t.Errorf("turn %d: sample differs from the simulator's request (-sim +sample):\n%s", s.Turn, diff)
		}
		if got := conversation.ExtractPrediction(s.Target()); got != s.Observation {
			t.Errorf("turn %d: the simulator reads the target as %q, want %q", s.Turn, got, s.Observation)
		}
	}
}
