// Package domain knows the seven environment domains a language world model
// simulates (MCP, Search, Terminal, SWE, Android, Web, OS): their names, the
// markers of the published data format, and per-domain prompt templates.
package domain

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/agentworld/agentworld/internal/pytext"
)

// Domain names one kind of simulated environment.
type Domain string

// The seven domains of AgentWorldBench, in the published leaderboard order.
const (
	MCP      Domain = "mcp"
	Search   Domain = "search"
	Terminal Domain = "terminal"
	SWE      Domain = "swe"
	Android  Domain = "android"
	Web      Domain = "web"
	OS       Domain = "os"
)

// All lists the seven domains in leaderboard order.
var All = []Domain{MCP, Search, Terminal, SWE, Android, Web, OS}

// ObservationMarker opens every real observation in the published data.
const ObservationMarker = "**Environment Observation:**"

// AnswerReminder ends every user message the simulator sends (and every
// user message of the training samples built for it): it repeats the
// answer format where a long history would otherwise bury it. It is the
// same in every message, so messages already sent never change.
const AnswerReminder = "Predict the environment's observation for this action. Put it inside <predicted_observation></predicted_observation>."

// Known reports whether d is one of the seven domains.
func (d Domain) Known() bool {
	for _, k := range All {
		if k == d {
			return true
		}
	}
	return false
}

// FromTask takes the domain from a record's task field: the last
// '/'-separated part, lower-cased ("x/y/Terminal" → terminal).
func FromTask(task string) Domain {
	if i := strings.LastIndexByte(task, '/'); i >= 0 {
		task = task[i+1:]
	}
	return Domain(strings.ToLower(pytext.Strip(task)))
}

// Parse accepts a domain name and rejects unknown ones.
func Parse(s string) (Domain, error) {
	d := Domain(strings.ToLower(pytext.Strip(s)))
	if !d.Known() {
		return "", fmt.Errorf("unknown domain %q (want one of %s)", s, names())
	}
	return d, nil
}

func names() string {
	parts := make([]string, len(All))
	for i, d := range All {
		parts[i] = string(d)
	}
	return strings.Join(parts, ", ")
}

// StripObservationMarker removes the observation marker the way the published
// judge does for predictions and ground truths: a leading marker is dropped
// once, otherwise every occurrence is removed; then whitespace is trimmed.
func StripObservationMarker(s string) string {
	if strings.HasPrefix(s, ObservationMarker) {
		s = s[len(ObservationMarker):]
	} else {
		s = strings.ReplaceAll(s, ObservationMarker, "")
	}
	return pytext.Strip(s)
}

// promptLine recognizes a shell prompt waiting for input (…$ or …# with
// nothing typed after it, such as "root@4c1f:/app#" or a bare "$").
var promptLine = regexp.MustCompile(`^\S*[@:]\S*[$#]$|^[$#]$`)

// IsPromptLine reports whether a terminal screen line is a shell prompt
// waiting for input; a screen whose last line is one has finished its
// command.
func IsPromptLine(line string) bool { return promptLine.MatchString(line) }
