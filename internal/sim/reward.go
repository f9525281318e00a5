package sim

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/world"
)

// applyWorldReward adds the world spec's reward rules to a step's
// observation: the tool-error rule on an answered action, and the success
// criterion once the episode ends, judged on the final observation the
// agent saw (this step's, or the last turn's when an end action such as []
// was answered without one). Each rule that fires is named in
// info.reward_components beside what the environment reported. A judged
// criterion asks the success judge; its verdict is in
// info.extra.success_judge, and a judge that gives none leaves "success"
// out of the components and says why there and in info.error.
func (m *Manager) applyWorldReward(ctx context.Context, info SessionInfo, act conversation.Action, obs *Observation) {
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
		if r.Success.Judge == nil {
			_, v := r.Success.Decide(ending(info, act, obs, final))
			add("success", v)
			return
		}
		v, err := m.judgeSuccess(ctx, info, act, obs, final)
		extra := struct {
			judge.SuccessVerdict
			Error string `json:"error,omitempty"`
		}{SuccessVerdict: v}
		if err != nil {
			extra.Error = err.Error()
			obs.Info.Error = strings.TrimPrefix(obs.Info.Error+"; success judge: "+err.Error(), "; ")
		} else if v.Success {
			add("success", r.Success.Earned())
		} else {
			add("success", 0)
		}
		raw, _ := json.Marshal(extra) // plain fields: never fails
		x := maps.Clone(obs.Info.Extra)
		if x == nil {
			x = map[string]json.RawMessage{}
		}
		x["success_judge"] = raw
		obs.Info.Extra = x
	}
}

// ending is what a rule-decided success criterion reads of the episode:
// its final observation, the text of the action that ended it (a final
// answer), and every observation in order.
func ending(info SessionInfo, act conversation.Action, obs *Observation, final string) world.Ending {
	e := world.Ending{Final: final, Observations: make([]string, 0, len(info.History)+1)}
	if act.End && act.Tool == nil {
		e.Answer = answerText(act.Text)
	}
	for _, h := range info.History {
		e.Observations = append(e.Observations, h.Observation)
	}
	if obs.Text != "" {
		e.Observations = append(e.Observations, obs.Text)
	}
	return e
}

// answerText is the answer an episode-ending action carries: a web
// agent's send_msg_to_user("…") gives its message; any other text is the
// answer itself.
func answerText(text string) string {
	t := strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(t, "send_msg_to_user("); ok && strings.HasSuffix(rest, ")") {
		arg := strings.TrimSpace(strings.TrimSuffix(rest, ")"))
		if s, err := strconv.Unquote(arg); err == nil {
			return s
		}
		if len(arg) >= 2 && arg[0] == '\'' && arg[len(arg)-1] == '\'' {
			return arg[1 : len(arg)-1]
		}
	}
	return text
}

// judgeSuccess puts the ended episode to the success judge: the world's
// criterion and task, and the transcript (this step included when it was
// answered) or only the final observation, as the criterion asks.
func (m *Manager) judgeSuccess(ctx context.Context, info SessionInfo, act conversation.Action, obs *Observation, final string) (judge.SuccessVerdict, error) {
	j := m.opts.SuccessJudge
	if j == nil { // refused when the world was loaded; a spec built in code may still get here
		return judge.SuccessVerdict{}, errNoSuccessJudge
	}
	rule := info.Spec.Reward.Success.Judge
	c := judge.SuccessCase{Criterion: rule.Criterion, Task: info.Spec.TaskDescription, Final: final}
	if rule.Sees != world.JudgeSeesFinalObservation {
		c.Turns = make([]judge.SuccessTurn, 0, len(info.History)+1)
		for _, h := range info.History {
			c.Turns = append(c.Turns, judge.SuccessTurn{Action: h.Action, Observation: h.Observation})
		}
		if !act.End {
			c.Turns = append(c.Turns, judge.SuccessTurn{Action: act.Text, Observation: obs.Text})
		}
	}
	// The step is computed and will be recorded even if the client goes
	// away meanwhile; a verdict cut short would record the episode without
	// its reward for good, so the judge runs to its own timeouts.
	return j.Judge(context.WithoutCancel(ctx), c)
}

// errNoSuccessJudge is why a judged criterion cannot be decided here.
// The operator's setting that provides one is Options.SuccessJudge.
var errNoSuccessJudge = errors.New("this server has no success judge")
