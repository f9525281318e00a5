package world

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Reward is a world's reward rules, which the simulator applies to every
// step of the world's sessions, whatever answers them (a world model,
// replay or a real environment). A step's reward is the sum of the rules
// that fire; info.reward_components names each.
type Reward struct {
	// ToolError is added to a step whose observation is a tool error: a
	// JSON object with "isError": true (an MCP result) or an "error" key.
	// 0 means no such rule; it is usually negative.
	ToolError float64 `json:"tool_error,omitempty"`
	// Success is the episode-success criterion, checked once when the
	// episode ends; nil means none.
	Success *SuccessRule `json:"success,omitempty"`
}

// SuccessRule decides whether an ended episode succeeded: by a regular
// expression over its final observation (the last one the agent saw), or
// by an LLM judge given a criterion in words. Exactly one is set.
type SuccessRule struct {
	// FinalObservation is a regular expression (RE2 syntax) the final
	// observation must match; "" when Judge decides.
	FinalObservation string `json:"final_observation,omitempty"`
	// Judge has the server's success judge (serve --success-judge-url)
	// decide; nil when FinalObservation decides.
	Judge *SuccessJudge `json:"judge,omitempty"`
	// Reward is given on success; 0 means 1.
	Reward float64 `json:"reward,omitempty"`
	re     *regexp.Regexp
}

// SuccessJudge is an episode-success criterion a model judges when the
// episode ends.
type SuccessJudge struct {
	// Criterion says in words what a successful episode achieved; the judge
	// sees it beside the task description. Required.
	Criterion string `json:"criterion"`
	// Sees is what the judge reads: "transcript" (every action and
	// observation) or "final_observation" (the last observation only); ""
	// means "transcript".
	Sees string `json:"sees,omitempty"`
}

// What a [SuccessJudge] may see.
const (
	JudgeSeesTranscript       = "transcript"
	JudgeSeesFinalObservation = "final_observation"
)

// Judged reports whether the reward needs a success judge at episode end.
func (r *Reward) Judged() bool {
	return r != nil && r.Success != nil && r.Success.Judge != nil
}

// validate compiles the rule; the error names the field.
func (r *Reward) validate() error {
	if r == nil || r.Success == nil {
		return nil
	}
	if j := r.Success.Judge; j != nil {
		if r.Success.FinalObservation != "" {
			return bad("reward.success", "give either final_observation or judge, not both")
		}
		if strings.TrimSpace(j.Criterion) == "" {
			return bad("reward.success.judge.criterion", "missing")
		}
		switch j.Sees {
		case "", JudgeSeesTranscript, JudgeSeesFinalObservation:
		default:
			return bad("reward.success.judge.sees", "%q: want %q or %q", j.Sees, JudgeSeesTranscript, JudgeSeesFinalObservation)
		}
		return nil
	}
	if r.Success.FinalObservation == "" {
		return bad("reward.success.final_observation", "missing (or give judge)")
	}
	re, err := regexp.Compile(r.Success.FinalObservation)
	if err != nil {
		return bad("reward.success.final_observation", "not a regular expression: %v", err)
	}
	r.Success.re = re
	return nil
}

// Earned is the reward a successful episode earns.
func (s *SuccessRule) Earned() float64 {
	if s.Reward == 0 {
		return 1
	}
	return s.Reward
}

// Succeeded reports whether a final observation meets the regular
// expression and the reward it earns (a judged rule is never met here).
func (s *SuccessRule) Succeeded(final string) (bool, float64) {
	if s.Judge != nil {
		return false, 0
	}
	re := s.re
	if re == nil { // a spec built in code, or decoded without Validate
		var err error
		if re, err = regexp.Compile(s.FinalObservation); err != nil {
			return false, 0
		}
	}
	if !re.MatchString(final) {
		return false, 0
	}
	return true, s.Earned()
}

// IsToolError reports whether an observation is a tool error: a JSON
// object with "isError": true or an "error" key.
func IsToolError(obs string) bool {
	obs = strings.TrimSpace(obs)
	if !strings.HasPrefix(obs, "{") {
		return false
	}
	var v map[string]json.RawMessage
	if json.Unmarshal([]byte(obs), &v) != nil {
		return false
	}
	if _, ok := v["error"]; ok {
		return true
	}
	return strings.TrimSpace(string(v["isError"])) == "true"
}
