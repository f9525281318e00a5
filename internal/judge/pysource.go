package judge

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// pyString is the value of one module-level assignment NAME = """…""" read
// from a Python source file, with the line its literal starts on.
type pyString struct {
	Value string
	Line  int
	// lines maps offsets of Value to source lines: lines[i] is the offset
	// at which source line Line+i+1 starts (escape sequences such as \n do
	// not start a source line; a newline inside the literal does).
	lines []int
}

// lineAt is the source line of byte offset off of Value.
func (s *pyString) lineAt(off int) int {
	n := 0
	for n < len(s.lines) && s.lines[n] <= off {
		n++
	}
	return s.Line + n
}

// readPyStrings reads the module-level assignments of the given names from
// Python source src (named file in errors). It understands exactly one
// form: a name at the start of a line, "=", and one triple-quoted string
// literal (optionally r-prefixed), followed by nothing but a comment. Any
// other value for a wanted name (an f-string, a concatenation, a call, a
// single-quoted string, a name assigned twice) is refused with file:line,
// as is a wanted name that is not assigned at all. The rest of the file is
// skipped as Python tokens (comments and string literals), so a wanted name
// quoted inside another string is not mistaken for an assignment.
func readPyStrings(file string, src []byte, names ...string) (map[string]*pyString, error) {
	// Python reads source with universal newlines.
	text := strings.ReplaceAll(string(src), "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("%s: not UTF-8 text", file)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]*pyString{}
	line := 1
	i := 0
	atLineStart := true
	for i < len(text) {
		c := text[i]
		if atLineStart && isIdentStart(c) {
			j := i
			for j < len(text) && isIdentChar(text[j]) {
				j++
			}
			name := text[i:j]
			if want[name] {
				k := skipBlanks(text, j)
				if k < len(text) && text[k] == '=' && (k+1 >= len(text) || text[k+1] != '=') {
					if prev, ok := out[name]; ok {
						return nil, fmt.Errorf("%s:%d: %s is assigned again (first at line %d); refusing to guess which one counts", file, line, name, prev.Line)
					}
					s, end, endLine, err := readAssigned(file, text, skipBlanks(text, k+1), line, name)
					if err != nil {
						return nil, err
					}
					out[name] = s
					i, line = end, endLine
					atLineStart = false
					continue
				}
			}
		}
		atLineStart = false
		switch {
		case c == '\n':
			line++
			i++
			atLineStart = true
		case c == '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			end, endLine, err := skipPyString(file, text, i, line)
			if err != nil {
				return nil, err
			}
			i, line = end, endLine
		case c == '\\' && i+1 < len(text) && text[i+1] == '\n':
			i += 2 // explicit line joining
			line++
		default:
			i++
		}
	}
	for _, n := range names {
		if out[n] == nil {
			return nil, fmt.Errorf("%s: no assignment %s = \"\"\"...\"\"\" found", file, n)
		}
	}
	return out, nil
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// readAssigned reads the triple-quoted literal at text[i:] assigned to name
// on line line, and checks that nothing but a comment follows it.
func readAssigned(file, text string, i, line int, name string) (*pyString, int, int, error) {
	raw := false
	if i < len(text) && (text[i] == 'r' || text[i] == 'R') {
		raw = true
		i++
	}
	if !strings.HasPrefix(text[i:], `"""`) && !strings.HasPrefix(text[i:], `'''`) {
		return nil, 0, 0, fmt.Errorf("%s:%d: %s is not assigned a plain triple-quoted string (only NAME = \"\"\"...\"\"\" is read)", file, line, name)
	}
	q := text[i : i+3]
	start := line
	i += 3
	var b strings.Builder
	s := &pyString{Line: start}
	for {
		if i >= len(text) {
			return nil, 0, 0, fmt.Errorf("%s:%d: %s: string not closed", file, start, name)
		}
		if strings.HasPrefix(text[i:], q) {
			i += 3
			break
		}
		c := text[i]
		if c == '\n' {
			b.WriteByte('\n')
			line++
			s.lines = append(s.lines, b.Len())
			i++
			continue
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(text) {
			return nil, 0, 0, fmt.Errorf("%s:%d: %s: string not closed", file, start, name)
		}
		if raw {
			// A raw string keeps the backslash, and the quote or newline
			// after it does not end the string.
			b.WriteByte('\\')
			b.WriteByte(text[i+1])
			if text[i+1] == '\n' {
				line++
				s.lines = append(s.lines, b.Len())
			}
			i += 2
			continue
		}
		n, err := pyEscape(text[i:], &b)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s:%d: %s: %v", file, line, name, err)
		}
		if text[i+1] == '\n' {
			line++ // a line continuation inside the string: no newline in the value
		}
		i += n
	}
	s.Value = b.String()
	// Only a comment may follow on the same line.
	j := skipBlanks(text, i)
	if j < len(text) && text[j] != '\n' && text[j] != '#' {
		return nil, 0, 0, fmt.Errorf("%s:%d: %s: unexpected %q after the string (only NAME = \"\"\"...\"\"\" is read)", file, line, name, firstToken(text[j:]))
	}
	return s, i, line, nil
}

func firstToken(s string) string {
	if k := strings.IndexAny(s, " \t\n"); k >= 0 {
		s = s[:k]
	}
	if len(s) > 20 {
		s = s[:20]
	}
	return s
}

// pyEscape decodes the escape sequence at the start of s (s[0] is the
// backslash) as a non-raw Python str literal does, writing the result to b
// and returning how many bytes it used. An unknown escape keeps its
// backslash, as Python does; \N{...} is refused (it needs the Unicode name
// table, and the published files do not use it).
func pyEscape(s string, b *strings.Builder) (int, error) {
	c := s[1]
	simple := map[byte]byte{'\\': '\\', '\'': '\'', '"': '"', 'a': 7, 'b': 8, 'f': 12, 'n': '\n', 'r': '\r', 't': '\t', 'v': 11}
	if r, ok := simple[c]; ok {
		b.WriteByte(r)
		return 2, nil
	}
	switch {
	case c == '\n':
		return 2, nil
	case c >= '0' && c <= '7':
		n := 1
		for n < 3 && 1+n < len(s) && s[1+n] >= '0' && s[1+n] <= '7' {
			n++
		}
		v, _ := strconv.ParseUint(s[1:1+n], 8, 32)
		b.WriteRune(rune(v))
		return 1 + n, nil
	case c == 'x' || c == 'u' || c == 'U':
		width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
		if len(s) < 2+width {
			return 0, fmt.Errorf("truncated \\%c escape", c)
		}
		v, err := strconv.ParseUint(s[2:2+width], 16, 32)
		if err != nil || v > utf8.MaxRune {
			return 0, fmt.Errorf("bad \\%c escape %q", c, s[:2+width])
		}
		b.WriteRune(rune(v))
		return 2 + width, nil
	case c == 'N':
		return 0, fmt.Errorf(`\N{...} escapes are not supported`)
	}
	b.WriteByte('\\')
	return 1, nil
}

// skipPyString skips the string literal starting at text[i] (a quote; any
// prefix letters were already passed as identifier characters) and returns
// the offset after it and the line it ends on.
func skipPyString(file, text string, i, line int) (int, int, error) {
	start := line
	q := text[i : i+1]
	if strings.HasPrefix(text[i:], strings.Repeat(q, 3)) {
		q = strings.Repeat(q, 3)
	}
	i += len(q)
	for {
		if i >= len(text) {
			return 0, 0, fmt.Errorf("%s:%d: string not closed", file, start)
		}
		if strings.HasPrefix(text[i:], q) {
			return i + len(q), line, nil
		}
		switch text[i] {
		case '\\':
			if i+1 < len(text) && text[i+1] == '\n' {
				line++
			}
			i += 2
			continue
		case '\n':
			if len(q) == 1 {
				return 0, 0, fmt.Errorf("%s:%d: string not closed on its line", file, start)
			}
			line++
		}
		i++
	}
}
