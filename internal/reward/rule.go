package reward

import (
	"encoding/json"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/volatile"
)

// RuleScale is the rule component of a verified prediction; a failed one
// gets 0.
const RuleScale = 25

// Check is one check of the rule verifier.
type Check struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail,omitempty"`
}

// treeKeep is how much of the ground truth's share of well-formed tree
// lines a GUI prediction must keep to count as keeping the tree syntax.
const treeKeep = 0.9

// Rule is the binary rule verifier of one prediction: it passes when every
// check passes. The checks, in order:
//
//   - answer: there is a prediction (not empty, not "No output");
//   - json: where the ground truth is JSON (tool results), the prediction
//     parses as JSON;
//   - prompt (terminal): a screen whose ground truth ends on a shell prompt
//     ends on one as well; a ground truth without one means the command is
//     still running, and then any last line passes;
//   - echo (terminal): every command the action types that the real screen
//     shows is echoed in the prediction;
//   - tree (Android, Web, OS): the prediction keeps the tree syntax — at
//     least 90% of the ground truth's share of well-formed node lines;
//   - deterministic: the texts are equal after the volatile values (clock
//     times, dates, UUIDs, long hex ids, durations) are masked.
//
// action is the action prompt (for the terminal echo); "" skips that check.
func Rule(d domain.Domain, action, prediction, truth string) (bool, []Check) {
	var checks []Check
	add := func(name string, pass bool, detail string) {
		checks = append(checks, Check{Name: name, Pass: pass, Detail: detail})
	}
	pred := conversation.StripObservationMarker(prediction)
	truth = conversation.StripObservationMarker(truth)
	if pred == "" || pred == conversation.NoOutput {
		add("answer", false, "no prediction")
		return false, checks
	}
	add("answer", true, "")
	if looksJSON(truth) {
		ok := json.Valid([]byte(pred))
		add("json", ok, detailIf(!ok, "the ground truth is JSON, the prediction does not parse"))
	}
	switch d {
	case domain.Terminal:
		want, got := lastLine(truth), lastLine(pred)
		if domain.IsPromptLine(want) {
			ok := domain.IsPromptLine(got)
			add("prompt", ok, detailIf(!ok, "the screen does not end on a prompt line"))
		} else {
			add("prompt", true, "command still running")
		}
		missing := ""
		for _, c := range judge.TypedCommands(action) {
			if strings.Contains(truth, c) && !strings.Contains(pred, c) {
				missing = c
				break
			}
		}
		add("echo", missing == "", detailIf(missing != "", "the typed command is not echoed: "+missing))
	case domain.Android, domain.Web, domain.OS:
		got, want := judge.TreeNodeShare(d, pred, truth)
		if want > 0 {
			ok := got > 0 && got >= treeKeep*want
			add("tree", ok, detailIf(!ok, "the prediction does not keep the tree syntax"))
		}
	}
	ok := volatile.Equal(pred, truth)
	add("deterministic", ok, detailIf(!ok, "deterministic content differs from the ground truth"))
	for _, c := range checks {
		if !c.Pass {
			return false, checks
		}
	}
	return true, checks
}

func detailIf(cond bool, s string) string {
	if cond {
		return s
	}
	return ""
}

// looksJSON reports whether s is a JSON object or array.
func looksJSON(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && (s[0] == '{' || s[0] == '[') && json.Valid([]byte(s))
}

func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimRight(s, " \t\r")
}
