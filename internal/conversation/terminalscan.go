package conversation

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// scanTerminal reads the usual Terminal action, a JSON array of objects
// whose only members are "keystrokes" (a string) and "duration" (a
// non-negative number), each spelled so and present at most once, the
// strings of plain UTF-8 text with no escapes but \", \\, \b, \f, \n, \r
// and \t, in one pass and without decoding into generic values: the
// canonical text of such an array is its own tokens with the white space
// between them dropped and each object's members in key order. Anything
// else (other members, other escapes, an error to report) is left to
// parseAction: ok false. What it returns equals parseAction's result
// (FuzzScanTerminal).
func scanTerminal(s string) (a Action, ok bool) {
	i := skipSpace(s, 0)
	if i >= len(s) || s[i] != '[' {
		return Action{}, false
	}
	var text strings.Builder
	text.Grow(len(s))
	text.WriteByte('[')
	if i = skipSpace(s, i+1); i < len(s) && s[i] == ']' {
		if skipSpace(s, i+1) != len(s) {
			return Action{}, false
		}
		return Action{Text: "[]", End: true, EndReason: "the agent sent [] (task finished)"}, true
	}
	var ks []Keystroke
	for {
		if i >= len(s) || s[i] != '{' {
			return Action{}, false
		}
		var keysLit, durLit string
		var k Keystroke
		i = skipSpace(s, i+1)
		for {
			var key string
			if key, i, ok = scanMemberKey(s, i); !ok {
				return Action{}, false
			}
			switch {
			case key == "keystrokes" && keysLit == "":
				var end int
				if k.Keystrokes, end, ok = scanPlainString(s, i); !ok {
					return Action{}, false
				}
				keysLit, i = s[i:end], end
			case key == "duration" && durLit == "":
				end := scanNumber(s, i)
				if end < 0 {
					return Action{}, false
				}
				f, err := strconv.ParseFloat(s[i:end], 64)
				if err != nil || f < 0 {
					return Action{}, false
				}
				durLit, k.Duration, i = s[i:end], f, end
			default:
				return Action{}, false
			}
			if i = skipSpace(s, i); i < len(s) && s[i] == ',' {
				i = skipSpace(s, i+1)
				continue
			}
			if i >= len(s) || s[i] != '}' {
				return Action{}, false
			}
			break
		}
		if keysLit == "" {
			return Action{}, false
		}
		if len(ks) > 0 {
			text.WriteByte(',')
		}
		text.WriteByte('{')
		if durLit != "" {
			text.WriteString(`"duration":`)
			text.WriteString(durLit)
			text.WriteByte(',')
		}
		text.WriteString(`"keystrokes":`)
		text.WriteString(keysLit)
		text.WriteByte('}')
		ks = append(ks, k)
		if i = skipSpace(s, i+1); i < len(s) && s[i] == ',' {
			i = skipSpace(s, i+1)
			continue
		}
		if i >= len(s) || s[i] != ']' || skipSpace(s, i+1) != len(s) {
			return Action{}, false
		}
		text.WriteByte(']')
		return Action{Text: text.String(), Keystrokes: ks}, true
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// scanMemberKey reads `"key" :` at i, a key without escapes, and returns
// the key and the index of the value after the colon and white space.
func scanMemberKey(s string, i int) (key string, next int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	end := strings.IndexByte(s[i+1:], '"')
	if end < 0 {
		return "", 0, false
	}
	key = s[i+1 : i+1+end]
	if strings.IndexByte(key, '\\') >= 0 {
		return "", 0, false
	}
	j := skipSpace(s, i+end+2)
	if j >= len(s) || s[j] != ':' {
		return "", 0, false
	}
	return key, skipSpace(s, j+1), true
}

// scanPlainString reads the string literal at i when its canonical
// encoding is the literal itself: valid UTF-8 without control characters,
// U+2028 or U+2029 (which the encoder escapes), and no escapes but the
// short ones the encoder writes back alike. It returns the decoded value
// and the index after the closing quote.
func scanPlainString(s string, i int) (val string, end int, ok bool) {
	if i >= len(s) || s[i] != '"' {
		return "", 0, false
	}
	start := i + 1
	// b is the decoded value once an escape is met, in a buffer of the
	// literal's size (the value is shorter): one allocation.
	var b strings.Builder
	for j := start; j < len(s); {
		c := s[j]
		switch {
		case c == '"':
			if b.Cap() == 0 {
				return s[start:j], j + 1, true
			}
			return b.String(), j + 1, true
		case c == '\\':
			if j+1 >= len(s) {
				return "", 0, false
			}
			var d byte
			switch s[j+1] {
			case '"', '\\':
				d = s[j+1]
			case 'b':
				d = '\b'
			case 'f':
				d = '\f'
			case 'n':
				d = '\n'
			case 'r':
				d = '\r'
			case 't':
				d = '\t'
			default: // \/ and \u are written back otherwise
				return "", 0, false
			}
			if b.Cap() == 0 {
				b.Grow(literalEnd(s, j) - start)
				b.WriteString(s[start:j])
			}
			b.WriteByte(d)
			j += 2
		case c < 0x20:
			return "", 0, false
		case c < utf8.RuneSelf:
			if b.Cap() != 0 {
				b.WriteByte(c)
			}
			j++
		default:
			r, size := utf8.DecodeRuneInString(s[j:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return "", 0, false
			}
			if b.Cap() != 0 {
				b.WriteString(s[j : j+size])
			}
			j += size
		}
	}
	return "", 0, false
}

// literalEnd returns the index of the quote that closes the string
// literal j is inside of (j at or after its opening quote's successor),
// or len(s) when none does.
func literalEnd(s string, j int) int {
	for j < len(s) {
		switch s[j] {
		case '"':
			return j
		case '\\':
			j += 2
		default:
			j++
		}
	}
	return len(s)
}

// scanNumber returns the index after the JSON number at i, or -1 when
// there is none.
func scanNumber(s string, i int) int {
	digits := func(j int) int {
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
		return j
	}
	j := i
	if j < len(s) && s[j] == '-' {
		j++
	}
	switch {
	case j < len(s) && s[j] == '0':
		j++
	case j < len(s) && '1' <= s[j] && s[j] <= '9':
		j = digits(j)
	default:
		return -1
	}
	if j < len(s) && s[j] == '.' {
		k := digits(j + 1)
		if k == j+1 {
			return -1
		}
		j = k
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		j++
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := digits(j)
		if k == j {
			return -1
		}
		j = k
	}
	return j
}
