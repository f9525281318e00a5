// Package pytext reproduces the few text and number semantics of the
// published Python evaluation code that Go does differently (str.strip's
// whitespace set, round-half-to-even), so agentworld's numbers compare with
// the published ones exactly.
package pytext

import (
	"math"
	"strings"
	"unicode"
)

// IsSpace matches Python's str.isspace for one rune: Go's unicode.IsSpace
// plus the four information separators U+001C..U+001F.
func IsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// Strip is Python's str.strip() with no arguments.
func Strip(s string) string { return strings.TrimFunc(s, IsSpace) }

// RoundHalfEven is Python 3's round(x) for a float: halves go to the even
// integer.
func RoundHalfEven(x float64) float64 { return math.RoundToEven(x) }
