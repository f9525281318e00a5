// Package volatile masks the values of an observation that no simulator can
// know in advance — clock times, dates, UUIDs, long hex ids, durations — so
// that the rest, the deterministic content, can be compared strictly. The
// comparison of simulated with real observations (realenv) and the rule
// component of the reward (reward) use this one definition, so both call the
// same two texts equal.
package volatile

import (
	"bytes"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
)

// MaskLine replaces the volatile values of one line by placeholders. It
// scans the line once; at every word boundary it tries, in this order:
//
//	real 0m1.250s                          → real <duration> (the shell's time)
//	123e4567-e89b-12d3-a456-426614174000   → <uuid>
//	2026-11-29T17:03:14.5+01:00            → <datetime> (seconds, fraction, zone optional)
//	17:03:14 or 7:03:14.25                 → <time>
//	Tue Nov 29                             → <date>
//	Nov 29 17:03, Nov 29 2026              → <date> (hh:mm not followed by :ss)
//	9b53109a1c2d (12 to 64 lower-case hex) → <hex>
//	35ms, 1.5s                             → <duration>
//
// Each value must end at a word boundary where the old regular
// expressions required one. Hand-written instead of eight regular
// expressions, it is what makes the reward's rule component fast (the
// expressions cost about 2 ms per 2 KB observation).
func MaskLine(l string) string {
	if !mayHoldVolatile(l) {
		return l
	}
	b, changed := appendMasked(nil, l)
	if !changed {
		return l
	}
	return string(b)
}

// appendMasked appends the masked form of l to dst; changed reports
// whether anything was masked (when not, nothing is appended).
func appendMasked(dst []byte, l string) (out []byte, changed bool) {
	last := 0
	for i := 0; i < len(l); i++ {
		if !isWord(l[i]) || (i > 0 && isWord(l[i-1])) {
			continue
		}
		n, repl := matchAt(l, i)
		if n == 0 {
			continue
		}
		dst = append(dst, l[last:i]...)
		dst = append(dst, repl...)
		last = i + n
		i = last - 1
		changed = true
	}
	if !changed {
		return dst, false
	}
	return append(dst, l[last:]...), true
}

// equalMasked reports MaskLine(a) == MaskLine(b), masking into the two
// buffers (returned for reuse) instead of allocating.
func equalMasked(a, b string, ba, bb []byte) (bool, []byte, []byte) {
	ba, bb = maskInto(ba[:0], a), maskInto(bb[:0], b)
	return bytes.Equal(ba, bb), ba, bb
}

// maskInto appends the masked form of l to dst, or l itself when nothing
// in it is volatile.
func maskInto(dst []byte, l string) []byte {
	if mayHoldVolatile(l) {
		if out, ok := appendMasked(dst, l); ok {
			return out
		}
	}
	return append(dst, l...)
}

func isDigit(c byte) bool    { return c >= '0' && c <= '9' }
func isLowerHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' }
func isHex(c byte) bool      { return isLowerHex(c) || c >= 'A' && c <= 'F' }
func isWord(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// boundaryAt reports a word boundary after a match ending at j (the match
// ends in a word character).
func boundaryAt(l string, j int) bool { return j >= len(l) || !isWord(l[j]) }

// run counts the characters from i on that satisfy f.
func run(l string, i int, f func(byte) bool) int {
	n := 0
	for i+n < len(l) && f(l[i+n]) {
		n++
	}
	return n
}

// exact reports whether exactly n characters satisfying f start at i.
func exact(l string, i, n int, f func(byte) bool) bool {
	return i+n <= len(l) && run(l, i, f) >= n
}

// matchAt tries every volatile value at i (a word boundary) and returns
// the length of the first that matches and its placeholder.
func matchAt(l string, i int) (int, string) {
	c := l[i]
	if c == 'r' {
		if n := matchReal(l, i); n > 0 {
			return n, "real <duration>"
		}
	}
	if isHex(c) {
		if n := matchUUID(l, i); n > 0 {
			return n, "<uuid>"
		}
	}
	if isDigit(c) {
		if n := matchDateTime(l, i); n > 0 {
			return n, "<datetime>"
		}
		if n := matchTime(l, i); n > 0 {
			return n, "<time>"
		}
	}
	if c >= 'A' && c <= 'Z' {
		if n := matchDayDate(l, i); n > 0 {
			return n, "<date>"
		}
		if n := matchMonthDate(l, i); n > 0 {
			return n, "<date>"
		}
	}
	if isLowerHex(c) {
		if n := run(l, i, isLowerHex); n >= 12 && n <= 64 && boundaryAt(l, i+n) {
			return n, "<hex>"
		}
	}
	if isDigit(c) {
		if n := matchDuration(l, i); n > 0 {
			return n, "<duration>"
		}
	}
	return 0, ""
}

// matchReal: "real", white space, then NmN.Ns.
func matchReal(l string, i int) int {
	if !strings.HasPrefix(l[i:], "real") {
		return 0
	}
	j := i + 4
	sp := run(l, j, isSpace)
	if sp == 0 {
		return 0
	}
	j += sp
	for _, sep := range []byte{'m', '.', 's'} {
		d := run(l, j, isDigit)
		if d == 0 || j+d >= len(l) || l[j+d] != sep {
			return 0
		}
		j += d + 1
	}
	return j - i
}

// matchUUID: 8-4-4-4-12 hex digits ending at a word boundary.
func matchUUID(l string, i int) int {
	j := i
	for k, n := range []int{8, 4, 4, 4, 12} {
		if run(l, j, isHex) < n {
			return 0
		}
		j += n
		if k < 4 {
			if j >= len(l) || l[j] != '-' {
				return 0
			}
			j++
		}
	}
	if !boundaryAt(l, j) {
		return 0
	}
	return j - i
}

// digitsThen reports whether n digits at j are followed by sep (0: none
// needed).
func digitsThen(l string, j, n int, sep byte) bool {
	for k := 0; k < n; k++ {
		if j+k >= len(l) || !isDigit(l[j+k]) {
			return false
		}
	}
	return sep == 0 || (j+n < len(l) && l[j+n] == sep)
}

// matchDateTime: YYYY-MM-DD, T or space, hh:mm, then optionally :ss with a
// fraction, then optionally Z or a ±hh[:]mm offset.
func matchDateTime(l string, i int) int {
	if !digitsThen(l, i, 4, '-') || !digitsThen(l, i+5, 2, '-') || !digitsThen(l, i+8, 2, 0) {
		return 0
	}
	j := i + 10
	if j >= len(l) || (l[j] != 'T' && l[j] != ' ') || !digitsThen(l, j+1, 2, ':') || !digitsThen(l, j+4, 2, 0) {
		return 0
	}
	j += 6
	if j < len(l) && l[j] == ':' && digitsThen(l, j+1, 2, 0) {
		j += 3
		if j+1 < len(l) && l[j] == '.' && isDigit(l[j+1]) {
			j += 1 + run(l, j+1, isDigit)
		}
	}
	switch {
	case j < len(l) && l[j] == 'Z':
		j++
	case j < len(l) && (l[j] == '+' || l[j] == '-') && digitsThen(l, j+1, 2, 0):
		if digitsThen(l, j+3, 0, ':') && digitsThen(l, j+4, 2, 0) {
			j += 6
		} else if digitsThen(l, j+3, 2, 0) {
			j += 5
		}
	}
	return j - i
}

// matchTime: h:mm:ss or hh:mm:ss, an optional fraction, at a boundary.
func matchTime(l string, i int) int {
	h := 1
	if i+1 < len(l) && isDigit(l[i+1]) {
		h = 2
	}
	j := i + h
	if !digitsThen(l, j, 0, ':') || !digitsThen(l, j+1, 2, ':') || !digitsThen(l, j+4, 2, 0) {
		return 0
	}
	j += 6
	if j+1 < len(l) && l[j] == '.' && isDigit(l[j+1]) {
		k := j + 1 + run(l, j+1, isDigit)
		if boundaryAt(l, k) {
			return k - i
		}
	}
	if !boundaryAt(l, j) {
		return 0
	}
	return j - i
}

var (
	days   = []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
	months = []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

func oneOf(l string, i int, words []string) bool {
	for _, w := range words {
		if strings.HasPrefix(l[i:], w) {
			return true
		}
	}
	return false
}

// dayOfMonth reads one or two digits at j; ok is false for none or more.
func dayOfMonth(l string, j int) (int, bool) {
	d := run(l, j, isDigit)
	return d, d == 1 || d == 2
}

// matchDayDate: "Tue Nov 29" (weekday, one space, month, spaces, day).
func matchDayDate(l string, i int) int {
	if !oneOf(l, i, days) || i+4 > len(l) || l[i+3] != ' ' || !oneOf(l, i+4, months) {
		return 0
	}
	j := i + 7
	sp := run(l, j, func(c byte) bool { return c == ' ' })
	if sp == 0 {
		return 0
	}
	j += sp
	d, ok := dayOfMonth(l, j)
	if !ok || !boundaryAt(l, j+d) {
		return 0
	}
	return j + d - i
}

// matchMonthDate: "Nov 29 17:03" or "Nov 29 2026" (ls -l); an hh:mm
// followed by :ss is left to the clock time instead.
func matchMonthDate(l string, i int) int {
	if !oneOf(l, i, months) {
		return 0
	}
	spaces := func(j int) int { return run(l, j, func(c byte) bool { return c == ' ' }) }
	j := i + 3
	sp := spaces(j)
	if sp == 0 {
		return 0
	}
	j += sp
	d, ok := dayOfMonth(l, j)
	if !ok {
		return 0
	}
	j += d
	sp = spaces(j)
	if sp == 0 {
		return 0
	}
	j += sp
	if digitsThen(l, j, 2, ':') && digitsThen(l, j+3, 2, 0) && boundaryAt(l, j+5) && !(j+6 < len(l) && l[j+5] == ':' && isDigit(l[j+6])) {
		return j + 5 - i
	}
	if digitsThen(l, j, 4, 0) && boundaryAt(l, j+4) {
		return j + 4 - i
	}
	return 0
}

// matchDuration: digits, an optional fraction, then ms or s, at a
// boundary.
func matchDuration(l string, i int) int {
	j := i + run(l, i, isDigit)
	unit := func(k int) int {
		if strings.HasPrefix(l[k:], "ms") && boundaryAt(l, k+2) {
			return k + 2
		}
		if k < len(l) && l[k] == 's' && boundaryAt(l, k+1) {
			return k + 1
		}
		return 0
	}
	if j+1 < len(l) && l[j] == '.' && isDigit(l[j+1]) {
		if e := unit(j + 1 + run(l, j+1, isDigit)); e > 0 {
			return e - i
		}
	}
	if e := unit(j); e > 0 {
		return e - i
	}
	return 0
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
	var ba, bb []byte
	for i := range la {
		if la[i] == lb[i] {
			continue
		}
		var eq bool
		if eq, ba, bb = equalMasked(la[i], lb[i], ba, bb); !eq {
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
