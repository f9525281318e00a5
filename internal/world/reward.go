package world

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/itemf1"
	"github.com/agentworld/agentworld/internal/regexlimit"
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
// expression over its final observation (the last one the agent saw), by
// the agent's final answer scored against an expected item set, by facts
// the episode's observations must have established, or by an LLM judge
// given a criterion in words. Exactly one is set.
type SuccessRule struct {
	// FinalObservation is a regular expression (RE2 syntax) the final
	// observation must match; "" when another rule decides. It is matched
	// against the observation's first regexlimit.MatchBytes bytes for its
	// program (regexlimit.DefaultMaxWork over its instructions: over
	// 300 KiB for a pattern of 50), so a long observation cannot make
	// the match cost more; a pattern that would see under
	// regexlimit.MinMatchBytes is refused.
	FinalObservation string `json:"final_observation,omitempty"`
	// Answer scores the agent's final answer (the text that ended the
	// episode) by item F1 against an expected set; nil when another rule
	// decides.
	Answer *AnswerRule `json:"answer,omitempty"`
	// State lists facts the episode's observations must have asserted by
	// its end, each read as the world ledger reads observations ([fiction.Extract],
	// the latest value of an entity's attribute winning); empty when
	// another rule decides.
	State []StateFact `json:"state,omitempty"`
	// Judge has the server's success judge (serve --success-judge-url)
	// decide; nil when FinalObservation decides.
	Judge *SuccessJudge `json:"judge,omitempty"`
	// Reward is given on success; 0 means 1.
	Reward     float64 `json:"reward,omitempty"`
	re         *regexp.Regexp
	matchBytes int
}

// AnswerRule is an expected answer set (WideSearch style): the final
// answer is split into items and scored by item F1 ([itemf1]).
type AnswerRule struct {
	// Items are the expected items; at least one.
	Items []string `json:"items"`
	// MinF1 is the item F1 an answer needs to succeed; 0 means 1 (every
	// item, nothing else). A success earns the rule's reward times the F1.
	MinF1 float64 `json:"min_f1,omitempty"`
}

// StateFact is one entity attribute an episode must leave with a value.
type StateFact struct {
	Entity    string `json:"entity"`
	Attribute string `json:"attribute"`
	Value     string `json:"value"`
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
	return r.Success.validate("reward.success")
}

// Validate checks a success rule given outside a spec (a task's check);
// the error names fields under "check".
func (s *SuccessRule) Validate() error { return s.validate("check") }

func (s *SuccessRule) validate(at string) error {
	set := 0
	for _, on := range []bool{s.FinalObservation != "", s.Judge != nil, s.Answer != nil, len(s.State) > 0} {
		if on {
			set++
		}
	}
	switch {
	case set == 0:
		return bad(at+".final_observation", "missing (or give answer, state or judge)")
	case set > 1:
		return bad(at, "give exactly one of final_observation, answer, state or judge")
	}
	if j := s.Judge; j != nil {
		if strings.TrimSpace(j.Criterion) == "" {
			return bad(at+".judge.criterion", "missing")
		}
		switch j.Sees {
		case "", JudgeSeesTranscript, JudgeSeesFinalObservation:
		default:
			return bad(at+".judge.sees", "%q: want %q or %q", j.Sees, JudgeSeesTranscript, JudgeSeesFinalObservation)
		}
		return nil
	}
	if a := s.Answer; a != nil {
		if len(a.Items) == 0 {
			return bad(at+".answer.items", "missing")
		}
		for i, it := range a.Items {
			if itemf1.Normalize(it) == "" {
				return bad(fmt.Sprintf("%s.answer.items[%d]", at, i), "empty after normalizing")
			}
		}
		if a.MinF1 < 0 || a.MinF1 > 1 {
			return bad(at+".answer.min_f1", "%v: want 0 to 1", a.MinF1)
		}
		return nil
	}
	if len(s.State) > 0 {
		for i, f := range s.State {
			if f.Entity == "" || f.Attribute == "" || f.Value == "" {
				return bad(fmt.Sprintf("%s.state[%d]", at, i), "entity, attribute and value are all required")
			}
		}
		return nil
	}
	re, n, err := compileFinal(s.FinalObservation)
	if err != nil {
		return bad(at+".final_observation", "not a usable regular expression: %v", err)
	}
	s.re, s.matchBytes = re, n
	return nil
}

// compileFinal compiles a final_observation pattern and the bytes of an
// observation it may be matched against.
func compileFinal(expr string) (*regexp.Regexp, int, error) {
	re, _, err := regexlimit.Compile(expr, nil)
	if err != nil {
		return nil, 0, err
	}
	k, err := regexlimit.Insts(expr, nil)
	if err != nil {
		return nil, 0, err
	}
	n, err := regexlimit.MatchBytes(k, regexlimit.DefaultMaxWork)
	if err != nil {
		return nil, 0, err
	}
	return re, n, nil
}

// Earned is the reward a successful episode earns.
func (s *SuccessRule) Earned() float64 {
	if s.Reward == 0 {
		return 1
	}
	return s.Reward
}

// Ending is what a success rule reads of an ended episode.
type Ending struct {
	// Final is the last observation the agent saw.
	Final string
	// Answer is the text of the action that ended the episode (a final
	// answer in a tool domain, a send_msg_to_user on the web); "" when
	// none.
	Answer string
	// Observations are the episode's observations in order (Final
	// included when it was answered in this episode).
	Observations []string
}

// Succeeded reports whether a final observation meets the regular
// expression and the reward it earns (a judged rule is never met here);
// see [SuccessRule.Decide] for the rules that read more of the episode.
func (s *SuccessRule) Succeeded(final string) (bool, float64) {
	return s.Decide(Ending{Final: final, Observations: []string{final}})
}

// Decide applies a rule that needs no judge to an ended episode and
// returns whether it succeeded and the reward it earns: the rule's reward,
// times the item F1 for an answer rule. A judged rule is never met here.
func (s *SuccessRule) Decide(e Ending) (bool, float64) {
	switch {
	case s.Judge != nil:
		return false, 0
	case s.Answer != nil:
		min := s.Answer.MinF1
		if min == 0 {
			min = 1
		}
		f1 := itemf1.ScoreAnswer(e.Answer, s.Answer.Items).F1
		if f1 < min-1e-9 {
			return false, 0
		}
		return true, s.Earned() * f1
	case len(s.State) > 0:
		if !StateHolds(s.State, e.Observations) {
			return false, 0
		}
		return true, s.Earned()
	}
	re, n := s.re, s.matchBytes
	if re == nil { // a spec built in code, or decoded without Validate
		var err error
		if re, n, err = compileFinal(s.FinalObservation); err != nil {
			return false, 0
		}
	}
	if !re.MatchString(regexlimit.Prefix(e.Final, n)) {
		return false, 0
	}
	return true, s.Earned()
}

// StateHolds reports whether the facts the observations assert, read in
// order as the world ledger reads them (the latest value of an attribute
// wins), give every wanted fact its value (compared by [itemf1.Normalize]).
func StateHolds(want []StateFact, observations []string) bool {
	if len(want) == 0 {
		return false
	}
	type ea struct{ e, a string }
	need := make(map[ea]string, len(want))
	for _, f := range want {
		need[ea{f.Entity, f.Attribute}] = ""
	}
	for _, o := range observations {
		for _, a := range fiction.Extract(o) {
			k := ea{a.Entity, a.Attribute}
			if _, ok := need[k]; ok {
				need[k] = a.Value
			}
		}
	}
	for _, f := range want {
		if itemf1.Normalize(need[ea{f.Entity, f.Attribute}]) != itemf1.Normalize(f.Value) {
			return false
		}
	}
	return true
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
