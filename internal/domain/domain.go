// Package domain knows the seven environment domains a language world model
// simulates (MCP, Search, Terminal, SWE, Android, Web, OS): their names and
// per-domain prompt templates. The markers of the published data format
// belong to package conversation, which renders and reads them.
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

// promptLine recognizes a shell prompt waiting for input (…$ or …# with
// nothing typed after it, such as "root@4c1f:/app#" or a bare "$").
var promptLine = regexp.MustCompile(`^\S*[@:]\S*[$#]$|^[$#]$`)

// IsPromptLine reports whether a terminal screen line is a shell prompt
// waiting for input; a screen whose last line is one has finished its
// command.
func IsPromptLine(line string) bool { return promptLine.MatchString(line) }
