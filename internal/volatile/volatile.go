// Package volatile masks the values of an observation that no simulator can
// know in advance — clock times, dates, UUIDs, long hex ids, durations — so
// that the rest, the deterministic content, can be compared strictly. The
// comparison of simulated with real observations (realenv) and the rule
// component of the reward (reward) use this one definition, so both call the
// same two texts equal.
package volatile

import (
	"regexp"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
)

// patterns are applied in order to every line; each match becomes its
// placeholder. The order matters: a full timestamp is masked before its
// clock time could be.
var patterns = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`), "<uuid>"},
	{regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?`), "<datetime>"},
	{regexp.MustCompile(`\b\d{1,2}:\d{2}:\d{2}(\.\d+)?\b`), "<time>"},
	{regexp.MustCompile(`\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2}\b`), "<date>"},
	{regexp.MustCompile(`\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} +(\d{2}:\d{2}|\d{4})\b`), "<date>"},
	{regexp.MustCompile(`\b[0-9a-f]{12,64}\b`), "<hex>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ms|s)\b`), "<duration>"},
	{regexp.MustCompile(`\breal\s+\d+m\d+\.\d+s`), "real <duration>"},
}

// MaskLine replaces the volatile values of one line by placeholders
// (<uuid>, <datetime>, <time>, <date>, <hex>, <duration>).
func MaskLine(l string) string {
	if !mayHoldVolatile(l) {
		return l
	}
	for _, p := range patterns {
		l = p.re.ReplaceAllString(l, p.repl)
	}
	return l
}

// mayHoldVolatile is a cheap exact pre-check: every pattern needs either a
// digit or a run of at least eight hex letters (a UUID's first group, a
// long hex id), so a line with neither is left alone without running the
// regular expressions.
func mayHoldVolatile(l string) bool {
	run := 0
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c >= '0' && c <= '9':
			return true
		case c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
			run++
			if run >= 8 {
				return true
			}
		default:
			run = 0
		}
	}
	return false
}

// Deterministic reduces an observation to the content a faithful simulator
// must reproduce exactly: the observation marker is dropped, line ends
// unified, trailing spaces and blank edge lines removed, and every line
// masked with [MaskLine].
func Deterministic(s string) string {
	lines := lines(s)
	for i, l := range lines {
		lines[i] = MaskLine(l)
	}
	return strings.Join(lines, "\n")
}

// Equal reports whether two observations have the same deterministic
// content, that is Deterministic(a) == Deterministic(b). It masks only the
// lines that differ, which keeps it fast on long, mostly equal screens.
func Equal(a, b string) bool {
	la, lb := lines(a), lines(b)
	if len(la) != len(lb) {
		return false
	}
	for i := range la {
		if la[i] != lb[i] && MaskLine(la[i]) != MaskLine(lb[i]) {
			return false
		}
	}
	return true
}

// lines splits an observation into its lines without the marker, with
// trailing spaces removed and without blank lines at either end.
func lines(s string) []string {
	s = conversation.StripObservationMarker(s)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	ls := strings.Split(s, "\n")
	for i, l := range ls {
		ls[i] = strings.TrimRight(l, " \t\r")
	}
	for len(ls) > 0 && ls[0] == "" {
		ls = ls[1:]
	}
	for len(ls) > 0 && ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}
