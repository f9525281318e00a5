package trainset

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// sampledFixture is a kept echo turn (weight 0.05) of the sampled set, as
// its SFT line renders it: the prompt, then the target with the reasoning
// inline.
func sampledFixture() *expand.Sample {
	return &expand.Sample{ID: "t#2", TrajectoryID: "t", Domain: "terminal", Turn: 2, TotalTurns: 3, System: "simulate a shell",
		History: []trajectory.Turn{{Action: "ls", Observation: "a.txt"}}, Action: "ls", Observation: "a.txt",
		Category: "echo", Weight: 0.05, Teacher: &expand.Teacher{Beam: "t-2-3", Reasoning: "same as before", Reward: 21}}
}

func sampledLineOf(t testing.TB, s *expand.Sample) []byte {
	t.Helper()
	cl := ChatLineOf(s)
	b, err := trajectory.Marshal(map[string]any{"messages": cl.Messages, "loss_weight": s.Weight, "category": s.Category,
		"id": s.Teacher.Beam, "sample": s.ID, "trajectory_id": s.TrajectoryID, "total_turns": s.TotalTurns, "domain": s.Domain, "turn": s.Turn, "reward": s.Teacher.Reward})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSampledEchoWeightReachesEachTrainer: a sampled echo turn's weight
// 0.05 arrives where each trainer reads weights, and its reasoning where
// each reads thinking.
func TestSampledEchoWeightReachesEachTrainer(t *testing.T) {
	s, errs := expand.ReadSampledLine(sampledLineOf(t, sampledFixture()), "sft.jsonl", 1)
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
	if d := cmp.Diff(sampledFixture(), s); d != "" {
		t.Fatalf("read back (-want +got):\n%s", d)
	}
	const target = "<think>\nsame as before\n</think>\n\n<predicted_observation>\na.txt\n</predicted_observation>"

	sw := SampledSwiftLineOf(s)
	last := sw.Messages[len(sw.Messages)-1]
	if *last.LossScale != 0.05 || last.Loss != nil || last.Content != target || *sw.Messages[2].LossScale != 0 || *sw.Messages[2].Loss {
		t.Errorf("swift: %+v", sw.Messages)
	}
	lf := SampledLFLineOf(s)
	lfLast := lf.Messages[len(lf.Messages)-1]
	if lfLast.LossWeight != 0.05 || lf.Messages[2].LossWeight != 0 ||
		cmp.Diff([]LFContent{{"reasoning", "same as before"}, {"text", "<predicted_observation>\na.txt\n</predicted_observation>"}}, lfLast.Content) != "" {
		t.Errorf("llamafactory: %+v", lf.Messages)
	}
	if cl := ChatLineOf(s); cl.LossWeight != 0.05 || cl.Messages[len(cl.Messages)-1].Content != target {
		t.Errorf("chat: %+v", cl)
	}
	if tl := TRLLineOf(s); tl.LossWeight != 0.05 || tl.Completion[0].Content != target {
		t.Errorf("trl: %+v", tl)
	}
	// The sampled formats write the line with probability 0.05.
	kept := 0
	for i := range 4000 {
		s.Teacher.Beam = "t-2-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		kept += sampledCopies(s.Weight, sampledRNG(1, s).Float64())
	}
	if kept < 4000*0.05*0.7 || kept > 4000*0.05*1.3 {
		t.Errorf("llamafactory-v0/trl: %d of 4000 draws kept, want about 200", kept)
	}
}

// FuzzReadSampledLine: any line is read or refused without panicking, and
// a line it accepts renders back to its own messages.
func FuzzReadSampledLine(f *testing.F) {
	f.Add(sampledLineOf(f, sampledFixture()))
	f.Add([]byte(`{"id":"x-1-1","loss_weight":1,"messages":[{"role":"user","content":"### Turn 1\n**Action:**\nls\n\nPredict"},{"role":"assistant","content":"<think>\n</think>\n\n<predicted_observation>\n\n</predicted_observation>"}]}`))
	f.Add([]byte(`{"id":"x","loss_weight":0,"messages":[{"role":"assistant","content":null}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, errs := expand.ReadSampledLine(data, "f.jsonl", 1)
		if len(errs) > 0 {
			return
		}
		var l struct {
			Messages []expand.Message `json:"messages"`
		}
		if err := json.Unmarshal(data, &l); err != nil {
			t.Fatalf("accepted a line that does not decode: %v", err)
		}
		got := append(s.Prompt(), expand.Message{Role: "assistant", Content: s.Target()})
		if len(got) != len(l.Messages) {
			t.Fatalf("accepted %d messages, renders %d", len(l.Messages), len(got))
		}
		for i := range got[:len(got)-1] {
			if got[i] != l.Messages[i] {
				t.Fatalf("message %d renders %q, line has %q", i, got[i], l.Messages[i])
			}
		}
	})
}
