package sim

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// TestWorldReward steps a world whose spec declares a tool-error penalty
// and a success criterion: the error step is penalized, the step that ends
// the episode ([], answered without the model) earns the success reward
// judged on the last observation, and an episode ending elsewhere earns 0.
func TestWorldReward(t *testing.T) {
	spec := termWorld()
	spec.Reward = &world.Reward{ToolError: -0.25, Success: &world.SuccessRule{FinalObservation: `(?m)^SOLVED$`}}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	var lastTraj func() map[string]json.RawMessage
	run := func(last string) []*StepResult {
		model := &scriptedModel{replies: []worldmodel.Response{
			{Content: `<predicted_observation>{"isError": true, "content": []}</predicted_observation>`, FinishReason: "stop"},
			{Content: "<predicted_observation>" + last + "</predicted_observation>", FinishReason: "stop"},
		}}
		m := New(&Options{
			Worlds:   map[string]*world.Spec{"t": spec},
			Backends: map[string]BackendFactory{BackendModel: NewModelBackend(model, &ModelOptions{MaxTokens: 100})},
		})
		t.Cleanup(func() { _ = m.Close(context.Background()) })
		rep, err := m.Create(context.Background(), CreateRequest{WorldID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		var out []*StepResult
		for _, a := range []string{`[{"keystrokes":"run\n"}]`, `[{"keystrokes":"fix\n"}]`, `[]`} {
			r, err := m.Step(context.Background(), rep.SessionID, StepRequest{Action: json.RawMessage(a)})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		lastTraj = func() map[string]json.RawMessage {
			tr, err := m.Trajectory(context.Background(), rep.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			if string(tr.Turns[0].Meta["reward"]) != "-0.25" || tr.Turns[1].Meta["reward"] != nil {
				t.Errorf("turn rewards %s %s", tr.Turns[0].Meta["reward"], tr.Turns[1].Meta["reward"])
			}
			return tr.Meta
		}
		return out
	}
	type got struct {
		Reward     float64
		Components map[string]float64
	}
	summary := func(rs []*StepResult) []got {
		var g []got
		for _, r := range rs {
			g = append(g, got{r.Reward, r.Info.RewardComponents})
		}
		return g
	}
	solved := summary(run("SOLVED"))
	want := []got{{-0.25, map[string]float64{"tool_error": -0.25}}, {0, nil}, {1, map[string]float64{"success": 1}}}
	if d := cmp.Diff(want, solved); d != "" {
		t.Errorf("solved episode (-want +got):\n%s", d)
	}
	if ret := string(lastTraj()["return"]); ret != "0.75" {
		t.Errorf("episode return %s, want 0.75", ret)
	}
	failed := summary(run("still broken"))
	want[2] = got{0, map[string]float64{"success": 0}}
	if d := cmp.Diff(want, failed); d != "" {
		t.Errorf("failed episode (-want +got):\n%s", d)
	}
}
