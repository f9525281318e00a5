package sim

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// TestAnswerAndStateRules ends MCP episodes with a final answer: an answer
// rule pays the item F1 of the answer when it reaches min_f1, and a state
// rule pays when the episode's observations asserted the wanted facts.
func TestAnswerAndStateRules(t *testing.T) {
	mcp := func(rule *world.SuccessRule) *world.Spec {
		s := &world.Spec{Name: "m", Domain: "mcp", TaskDescription: "a tracker",
			ActionSpace: world.ActionSpace{Tools: []world.Tool{{Name: "close_issue"}}},
			Reward:      &world.Reward{Success: rule}}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	run := func(spec *world.Spec, answer string) float64 {
		model := &scriptedModel{replies: []worldmodel.Response{
			{Content: `<predicted_observation>{"issue": {"id": "WS-9", "status": "closed"}}</predicted_observation>`, FinishReason: "stop"},
		}}
		m := New(&Options{
			Worlds:   map[string]*world.Spec{"m": spec},
			Backends: map[string]BackendFactory{BackendModel: NewModelBackend(model, &ModelOptions{MaxTokens: 100})},
		})
		t.Cleanup(func() { _ = m.Close(context.Background()) })
		rep, err := m.Create(context.Background(), CreateRequest{WorldID: "m"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Step(context.Background(), rep.SessionID, StepRequest{Action: json.RawMessage(`{"name":"close_issue","arguments":{"key":"WS-9"}}`)}); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(answer)
		r, err := m.Step(context.Background(), rep.SessionID, StepRequest{Action: raw})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Terminated {
			t.Fatalf("the answer did not end the episode: %+v", r)
		}
		return r.Info.RewardComponents["success"]
	}
	answer := &world.SuccessRule{Answer: &world.AnswerRule{Items: []string{"Oslo", "Bergen", "Tromsø"}, MinF1: 0.5}}
	for _, tc := range []struct {
		answer string
		want   float64
	}{
		{"Oslo, Bergen and Tromsø", 1},
		{"Oslo, Bergen", 0.8}, // P 1, R 2/3
		{"Paris", 0},
	} {
		if got := run(mcp(answer), tc.answer); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("answer %q: success %v, want %v", tc.answer, got, tc.want)
		}
	}
	closed := &world.SuccessRule{State: []world.StateFact{{Entity: "WS-9", Attribute: "status", Value: "closed"}}}
	if got := run(mcp(closed), "done"); got != 1 {
		t.Errorf("state rule met: success %v, want 1", got)
	}
	open := &world.SuccessRule{State: []world.StateFact{{Entity: "WS-9", Attribute: "status", Value: "open"}}}
	if got := run(mcp(open), "done"); got != 0 {
		t.Errorf("state rule not met: success %v, want 0", got)
	}
}

func TestAnswerText(t *testing.T) {
	for in, want := range map[string]string{
		`send_msg_to_user("Oslo, Bergen")`: "Oslo, Bergen",
		`send_msg_to_user('Oslo')`:         "Oslo",
		"Oslo and Bergen":                  "Oslo and Bergen",
		`send_msg_to_user(x)`:              `send_msg_to_user(x)`,
	} {
		if got := answerText(in); got != want {
			t.Errorf("answerText(%q) = %q, want %q", in, got, want)
		}
	}
}
