package sim

import (
	"maps"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/world"
)

// applyWorldReward adds the world spec's reward rules to a step's
// observation: the tool-error rule on an answered action, and the success
// criterion once the episode ends, judged on the final observation the
// agent saw (this step's, or the last turn's when an end action such as []
// was answered without one). Each rule that fires is named in
// info.reward_components beside what the environment reported.
func applyWorldReward(info SessionInfo, act conversation.Action, obs *Observation) {
	if info.Spec == nil || info.Spec.Reward == nil {
		return
	}
	r := info.Spec.Reward
	add := func(name string, v float64) {
		obs.Reward += v
		c := maps.Clone(obs.Info.RewardComponents)
		if c == nil {
			c = map[string]float64{}
		}
		c[name] += v
		obs.Info.RewardComponents = c
	}
	if r.ToolError != 0 && !act.End && world.IsToolError(obs.Text) {
		add("tool_error", r.ToolError)
	}
	if r.Success != nil && obs.Terminated {
		final := obs.Text
		if final == "" && len(info.History) > 0 {
			final = info.History[len(info.History)-1].Observation
		}
		_, v := r.Success.Succeeded(final)
		add("success", v)
	}
}
