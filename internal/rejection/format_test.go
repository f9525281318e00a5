package rejection

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// TestSFTLineReadsBack: every SFT line data sample writes (reasoning
// inline, in reasoning_content, or none; observations in marker form
// already; actions in heading form already) reads back as the sample it
// was made from with the kept beam as its target.
func TestSFTLineReadsBack(t *testing.T) {
	score := 20.0
	base := expand.Sample{ID: "t-1#3", TrajectoryID: "t-1", Domain: "mcp", Turn: 3, TotalTurns: 5, System: "simulate tools",
		History: []trajectory.Turn{{Action: `{"arguments":{},"name":"ls"}`, Observation: "a <b> & c"},
			{Action: "### Turn 2\n**Action:**\nrecorded form", Observation: "**Environment Observation:**\nalready marked"}},
		Action: `{"arguments":{"q":"x"},"name":"find"}`, Observation: "real", Category: "echo", Weight: 0.05, Template: "v2", TemplateID: "abc"}
	for _, tc := range []struct {
		name      string
		th        Thinking
		target    Target
		reasoning string
	}{
		{"inline", ThinkInline, TargetTeacher, "I think </think> twice\n</think>\n\n<predicted_observation>\nnot the end"},
		{"field", ThinkField, TargetTeacher, "weighing"},
		{"none", ThinkInline, TargetTeacher, ""},
		// --target real: the teacher's reasoning, then the real observation.
		{"real", ThinkInline, TargetReal, "weighing"},
		{"real field", ThinkField, TargetReal, "weighing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			c := &Candidate{ID: "t-1-3-2", Reasoning: tc.reasoning, Prediction: "found x\n</predicted_observation> inside", Reward: &reward.Result{Score: &score}}
			b, err := trajectory.Marshal(sftLine(&s, c, tc.th, tc.target))
			if err != nil {
				t.Fatal(err)
			}
			got, errs := expand.ReadSampledLine(b, "sft.jsonl", 1)
			if len(errs) > 0 {
				t.Fatalf("%v\n%s", errs[0], b)
			}
			// Turns already in their rendered form read back bare: they
			// render to the same messages.
			want := base
			want.History = []trajectory.Turn{base.History[0], {Action: "recorded form", Observation: "already marked"}}
			if d := cmp.Diff(base.Prompt(), want.Prompt()); d != "" {
				t.Fatalf("test setup: prompts differ:\n%s", d)
			}
			want.Observation = c.Prediction
			if tc.target == TargetReal {
				want.Observation = base.Observation
			}
			want.Teacher = &expand.Teacher{Beam: c.ID, Reasoning: tc.reasoning, Reward: score}
			if d := cmp.Diff(&want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
