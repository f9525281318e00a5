package judge

import (
	"regexp"
	"strings"
)

// The rules scorer reads whole observations (~15–40 KB each, four or five
// of them per sample), and running Go's regexp engine over every byte of
// them cost several milliseconds per sample. The scanners below give
// exactly what the published expressions give (differential tests and
// fuzz targets in textscan_test.go hold them to the expressions) by only
// running an expression where a match can start, or by matching simple
// expressions by hand.

// metaAlternatives are the runtime metadata patterns, masked before any
// comparison: ISO timestamps, clock times, UUIDs, long hex strings,
// durations, numbers of 7+ digits (ids, epoch times). Every one begins with
// \b followed by a hex digit, which is what findMeta relies on.
var metaAlternatives = []string{
	`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?`,
	`\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b`,
	`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`,
	`\b(?:0x)?[0-9a-f]{12,}\b`,
	`\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds)\b`,
	`\b\d{7,}\b`,
}

// metaAnchored is the alternation of metaAlternatives anchored at the start
// of its input: the metadata match, if any, that begins exactly there.
var metaAnchored = regexp.MustCompile(`^(?:` + strings.Join(metaAlternatives, "|") + `)`)

// maskMeta replaces runtime metadata in s with "<meta>", as
// regexp.MustCompile(strings.Join(metaAlternatives, "|")).ReplaceAllString
// does. That search takes the leftmost match and resumes after it; a match
// can only begin at the start of an ASCII word (every alternative opens
// with \b and a word character) whose first characters pass metaMayStart,
// so only there is the anchored expression run. Text without a digit is
// returned as is, as it always was.
func maskMeta(s string) string {
	if !strings.ContainsAny(s, "0123456789") {
		return s
	}
	var b strings.Builder
	copied := 0 // s[:copied] is already written to b
	for i := 0; i < len(s); {
		if !isWordByte(s[i]) {
			i++
			continue
		}
		// Only a word start can begin a match; after a match that ended
		// inside a word the rest of that word cannot.
		if (i == 0 || !isWordByte(s[i-1])) && metaMayStart(s, i) {
			if loc := metaAnchored.FindStringIndex(s[i:]); loc != nil {
				if b.Len() == 0 {
					b.Grow(len(s))
				}
				b.WriteString(s[copied:i])
				b.WriteString("<meta>")
				i += loc[1]
				copied = i
				continue
			}
		}
		for i < len(s) && isWordByte(s[i]) {
			i++
		}
	}
	if copied == 0 {
		return s
	}
	b.WriteString(s[copied:])
	return b.String()
}

// metaMayStart is a necessary condition for a metadata match beginning at
// s[i], a word start; it only saves running the expression where none can.
// Per alternative: a UUID or a long hex string needs 8 hex digits in a row;
// "0x…" a 0 then x; a date 4 digits then '-'; a clock time 1–2 digits then
// ':'; a duration digits then '.', a unit letter (m, s) or one space
// character before it; a long number 7 digits.
func metaMayStart(s string, i int) bool {
	hex := i
	for hex < len(s) && isHexByte(s[hex]) {
		hex++
	}
	if hex-i >= 8 {
		return true
	}
	if !isDigitByte(s[i]) {
		return false
	}
	j := i
	for j < len(s) && isDigitByte(s[j]) {
		j++
	}
	if j-i >= 7 {
		return true
	}
	if j == len(s) {
		return false
	}
	switch c := s[j]; c {
	case '-', ':', '.', 'm', 's':
		return true
	case 'x':
		return j == i+1 && s[i] == '0'
	case ' ', '\t', '\n', '\f', '\r':
		return j+1 < len(s) && (s[j+1] == 'm' || s[j+1] == 's')
	}
	return false
}

// isWordByte is regexp's ASCII word character (\w, what \b looks at).
func isWordByte(c byte) bool { return wordBytes[c] }

var wordBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c == '_' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
	}
	return t
}()

func isDigitByte(c byte) bool { return '0' <= c && c <= '9' }

func isHexByte(c byte) bool {
	return isDigitByte(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// isRESpace is regexp's \s: [\t\n\f\r ].
func isRESpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// collapseBlanks replaces every run of spaces and tabs with one space
// (regexp `[ \t]+` replaced by " ").
func collapseBlanks(l string) string {
	// Most lines need no change: no tab and no two spaces in a row.
	if strings.IndexByte(l, '\t') < 0 && !strings.Contains(l, "  ") {
		return l
	}
	b := make([]byte, 0, len(l))
	copied := 0 // l[:copied] is in b
	for i := 0; i < len(l); i++ {
		// A single space stays; a tab or a longer run becomes one space.
		if c := l[i]; c != '\t' && (c != ' ' || i+1 == len(l) || (l[i+1] != ' ' && l[i+1] != '\t')) {
			continue
		}
		b = append(append(b, l[copied:i]...), ' ')
		for i+1 < len(l) && (l[i+1] == ' ' || l[i+1] == '\t') {
			i++
		}
		copied = i + 1
	}
	return string(append(b, l[copied:]...))
}

// shapeBody masks a line's shape as the regexp pair did: every quoted
// string (`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`) becomes S, then every run
// of ASCII digits becomes 0. One pass does both: a quote's replacement
// separates the digits around it, and digits never start a quote.
func shapeBody(line string) string {
	var b []byte
	copied := 0
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == '"' || c == '\'':
			end := quotedEnd(line, i)
			if end < 0 {
				i++
				continue
			}
			b = append(b, line[copied:i]...)
			b = append(b, 'S')
			i, copied = end, end
		case isDigitByte(c):
			j := i + 1
			for j < len(line) && isDigitByte(line[j]) {
				j++
			}
			if j-i == 1 && c == '0' {
				i = j // a lone 0 stays what it is
				continue
			}
			b = append(b, line[copied:i]...)
			b = append(b, '0')
			i, copied = j, j
		default:
			i++
		}
	}
	if b == nil {
		return line
	}
	return string(append(b, line[copied:]...))
}

// quotedEnd returns the index just past the quoted string that opens at
// s[i] (a " or '), or -1 when it is not closed: inside, a backslash takes
// the next character whatever it is, except a newline, which the
// expression's dot does not match.
func quotedEnd(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case q:
			return j + 1
		case '\\':
			if j+1 >= len(s) || s[j+1] == '\n' {
				return -1
			}
			j++
		}
	}
	return -1
}

// hasBid reports whether l holds a Web node's [bid] label
// (`\[[A-Za-z0-9_.-]+\]`).
func hasBid(l string) bool {
	for i := 0; i < len(l); i++ {
		if l[i] != '[' {
			continue
		}
		j := i + 1
		for j < len(l) && isBidByte(l[j]) {
			j++
		}
		if j > i+1 && j < len(l) && l[j] == ']' {
			return true
		}
	}
	return false
}

func isBidByte(c byte) bool { return isWordByte(c) || c == '.' || c == '-' }

// trailingObject is what `\{.*\}\s*$` finds in l: from the first '{' to the
// end, when the last non-space character is a '}' after it and no newline
// lies between them; "" otherwise.
func trailingObject(l string) string {
	q := len(l)
	for q > 0 && isRESpace(l[q-1]) {
		q--
	}
	if q == 0 || l[q-1] != '}' {
		return ""
	}
	q--
	from := strings.LastIndexByte(l[:q], '\n') + 1
	p := strings.IndexByte(l[from:q], '{')
	if p < 0 {
		return ""
	}
	return l[from+p:]
}
