package realenv

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/volatile"
)

// Divergence compares a simulated observation with the real one for the
// same action and history.
type Divergence struct {
	Turn int `json:"turn,omitempty"`
	// Exact is true when the deterministic content matches exactly: both
	// texts equal after [volatile.Deterministic] (marker, blank edges and
	// trailing spaces removed, volatile values such as clock times,
	// dates, hex ids and durations masked).
	Exact bool `json:"exact"`
	// Similarity is a normalized token similarity in [0, 1]: twice the
	// longest common token subsequence over the total token count, on the
	// normalized texts (1 for two empty texts).
	Similarity float64 `json:"similarity"`
	// Rules are the domain's rule checks; RulesPassed is true when every
	// one passes.
	Rules       []RuleResult `json:"rules"`
	RulesPassed bool         `json:"rules_passed"`
	// RuleScores are the offline rules judge's five dimensions (the
	// bench's "rules" judge) for the simulated observation against the real
	// one, in the context of the turns before it; RuleTotal is their mean.
	RuleScores *score.Scores `json:"rule_scores,omitempty"`
	RuleTotal  float64       `json:"rule_total,omitempty"`
	// Error is set when the simulator gave no observation (a transport
	// error); the other fields then compare against an empty text.
	Error string `json:"error,omitempty"`
}

// RuleResult is one rule check: a property extracted from both
// observations, and whether they agree.
type RuleResult struct {
	Name string `json:"name"`
	Real string `json:"real"`
	Sim  string `json:"sim"`
	Pass bool   `json:"pass"`
}

// maxLCSTokens bounds the quadratic similarity; longer texts fall back to
// a multiset overlap (Dice coefficient).
const maxLCSTokens = 3000

// Similarity is 2·LCS/(|a|+|b|) over whitespace tokens of the normalized
// texts (the Ratcliff/Obershelp-style ratio on tokens), or the Dice
// coefficient of the token multisets when either text is very long.
func Similarity(a, b string) float64 {
	ta, tb := strings.Fields(volatile.Deterministic(a)), strings.Fields(volatile.Deterministic(b))
	if len(ta)+len(tb) == 0 {
		return 1
	}
	if len(ta) > maxLCSTokens || len(tb) > maxLCSTokens {
		return dice(ta, tb)
	}
	prev := make([]int, len(tb)+1)
	cur := make([]int, len(tb)+1)
	for i := 1; i <= len(ta); i++ {
		for j := 1; j <= len(tb); j++ {
			switch {
			case ta[i-1] == tb[j-1]:
				cur[j] = prev[j-1] + 1
			case prev[j] >= cur[j-1]:
				cur[j] = prev[j]
			default:
				cur[j] = cur[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return 2 * float64(prev[len(tb)]) / float64(len(ta)+len(tb))
}

func dice(a, b []string) float64 {
	count := map[string]int{}
	for _, t := range a {
		count[t]++
	}
	common := 0
	for _, t := range b {
		if count[t] > 0 {
			count[t]--
			common++
		}
	}
	return 2 * float64(common) / float64(len(a)+len(b))
}

// Compare measures how far a simulated observation is from the real one.
func Compare(d domain.Domain, real, sim string) Divergence {
	nr, ns := volatile.Deterministic(real), volatile.Deterministic(sim)
	div := Divergence{Exact: nr == ns, Similarity: Similarity(real, sim)}
	div.Rules = rules(d, nr, ns)
	div.RulesPassed = true
	for _, r := range div.Rules {
		div.RulesPassed = div.RulesPassed && r.Pass
	}
	return div
}

// CompareTurn is Compare plus the rules judge's scores: history holds the
// real turns before this one, action is this turn's action.
func CompareTurn(d domain.Domain, history []trajectory.Turn, action, real, sim string) Divergence {
	div := Compare(d, real, sim)
	rec := &trajectory.Record{Task: string(d), ID: trajectory.IntID("0"), TurnIdx: len(history) + 1, TotalTurns: len(history) + 1}
	for i, h := range history {
		rec.Prompt = append(rec.Prompt, conversation.ActionPrompt(i+1, h.Action))
		rec.Response = append(rec.Response, conversation.ObservationResponse(h.Observation))
	}
	rec.Prompt = append(rec.Prompt, conversation.ActionPrompt(len(history)+1, action))
	rec.Response = append(rec.Response, conversation.ObservationResponse(real))
	rec.CurrentPrompt = rec.Prompt[len(rec.Prompt)-1]
	scores, _ := judge.Rules(rec, sim)
	div.RuleScores = &scores
	div.RuleTotal = scores.Total()
	return div
}

func rules(d domain.Domain, real, sim string) []RuleResult {
	check := func(name string, f func(string) string) RuleResult {
		r, s := f(real), f(sim)
		return RuleResult{Name: name, Real: r, Sim: s, Pass: r == s}
	}
	switch d {
	case domain.Terminal:
		return []RuleResult{
			check("final_line", lastLine),
			check("command_finished", func(s string) string { return boolText(domain.IsPromptLine(lastLine(s))) }),
			check("error_lines", errorLines),
		}
	case domain.MCP:
		return []RuleResult{
			check("json_valid", func(s string) string { return boolText(json.Valid([]byte(s))) }),
			check("is_error", mcpIsError),
			check("content_types", mcpContentTypes),
		}
	}
	return []RuleResult{
		check("empty", func(s string) string { return boolText(strings.TrimSpace(s) == "") }),
		check("json_valid", func(s string) string { return boolText(json.Valid([]byte(s))) }),
	}
}

// promptPrefix recognizes a line that starts with a prompt (an echoed
// command), whose text is the agent's, not the environment's.
var promptPrefix = regexp.MustCompile(`^\S*[@:]\S*[$#]( |$)`)

var errorLine = regexp.MustCompile(`(?i)(no such file|not found|permission denied|read-only file system|is a directory|not a directory|cannot |error|traceback|exception|failed|fatal|syntax)`)

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func errorLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if errorLine.MatchString(l) && !promptPrefix.MatchString(l) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "\n")
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func mcpIsError(s string) string {
	var v map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &v) != nil {
		return "unparsed"
	}
	if _, ok := v["error"]; ok {
		return "true"
	}
	if raw, ok := v["isError"]; ok && string(raw) == "true" {
		return "true"
	}
	return "false"
}

func mcpContentTypes(s string) string {
	var v struct {
		Content []struct {
			Type string `json:"type"`
		} `json:"content"`
	}
	if json.Unmarshal([]byte(s), &v) != nil {
		return "unparsed"
	}
	types := make([]string, len(v.Content))
	for i, c := range v.Content {
		types[i] = c.Type
	}
	slices.Sort(types)
	return strings.Join(types, ",")
}
