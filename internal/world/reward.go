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

// SuccessRule decides whether an ended episode succeeded from its final
// observation (the last one the agent saw).
type SuccessRule struct {
	// FinalObservation is a regular expression (RE2 syntax) the final
	// observation must match.
	FinalObservation string `json:"final_observation"`
	// Reward is given when it matches; 0 means 1.
	Reward float64 `json:"reward,omitempty"`
	re     *regexp.Regexp
}

// validate compiles the rule; the error names the field.
func (r *Reward) validate() error {
	if r == nil || r.Success == nil {
		return nil
	}
	if r.Success.FinalObservation == "" {
		return bad("reward.success.final_observation", "missing")
	}
	re, err := regexp.Compile(r.Success.FinalObservation)
	if err != nil {
		return bad("reward.success.final_observation", "not a regular expression: %v", err)
	}
	r.Success.re = re
	return nil
}

// Succeeded reports whether a final observation meets the criterion and
// the reward it earns.
func (s *SuccessRule) Succeeded(final string) (bool, float64) {
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
	if s.Reward == 0 {
		return true, 1
	}
	return true, s.Reward
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
