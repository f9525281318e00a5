package masking

import (
	"unicode/utf8"

	"github.com/agentworld/agentworld/internal/jsonunquote"
)

// maxActionDepth bounds the nesting of a structured action; a deeper one
// is read as text.
const maxActionDepth = 400

// keystrokesKey names the typed text of a Terminal action element.
const keystrokesKey = "keystrokes"

// actionWords hashes the agent's own words of an action (heading already
// removed) into sc.act and returns how many there are, with repetition.
//
// An action that is a JSON object or array (a Terminal keystroke list, a
// tool call, an Android action) counts the words of its values only, never
// its keys or the literals true, false and null: a tool call's name and
// argument values, an Android action's fields. An object holding a
// "keystrokes" key counts that key's value alone, so a Terminal action is
// the text it types, not its "duration" or the "n" of a "\n". Any other
// action (text, a web or OS call like click('12'), or JSON that does not
// parse) counts every word of its text.
func (sc *Scorer) actionWords(a []byte, escaped bool) int {
	if structured(a, escaped) {
		text := a
		if escaped {
			sc.buf = unescape(sc.buf[:0], a)
			text = sc.buf
		}
		w := actWalker{b: text, words: sc.words[:0], ks: sc.ks[:0]}
		ok := w.document()
		sc.words, sc.ks = w.words, w.ks
		if ok {
			for _, h := range w.words {
				sc.act.add(h)
			}
			return len(w.words)
		}
	}
	return scanWords(a, escaped, func(h uint64) { sc.act.add(h) })
}

// structured reports whether the action's first character (after JSON
// white space, escaped or not) opens an object or an array.
func structured(a []byte, escaped bool) bool {
	for i := 0; i < len(a); i++ {
		switch c := a[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case escaped && c == '\\' && i+1 < len(a) && (a[i+1] == 'n' || a[i+1] == 'r' || a[i+1] == 't'):
			i++
		default:
			return c == '{' || c == '['
		}
	}
	return false
}

// unescape appends the decoded contents of a JSON string literal (without
// its quotes) to dst, as encoding/json decodes it.
func unescape(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		r, n := decodeEscape(s[i:])
		dst = utf8.AppendRune(dst, r)
		i += n
	}
	return dst
}

// actWalker reads a JSON document strictly (as encoding/json and Python's
// json.loads agree on it: no NaN or Infinity) and collects the word
// hashes of its values.
type actWalker struct {
	b     []byte
	i     int
	depth int
	// words are the hashes so far; ks is a stack of the keystrokes values
	// of the objects being read.
	words, ks []uint64
}

func (w *actWalker) emit(h uint64) { w.words = append(w.words, h) }

func (w *actWalker) ws() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

func (w *actWalker) document() bool {
	w.ws()
	if !w.value() {
		return false
	}
	w.ws()
	return w.i == len(w.b)
}

func (w *actWalker) value() bool {
	if w.i >= len(w.b) {
		return false
	}
	switch c := w.b[w.i]; {
	case c == '{':
		return w.object()
	case c == '[':
		return w.array()
	case c == '"':
		s, e, ok := w.str()
		if ok {
			scanWords(w.b[s:e], true, w.emit)
		}
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		s := w.i
		if !w.number() {
			return false
		}
		scanWords(w.b[s:w.i], false, w.emit)
		return true
	}
	for _, lit := range []string{"true", "false", "null"} {
		if len(w.b)-w.i >= len(lit) && string(w.b[w.i:w.i+len(lit)]) == lit {
			w.i += len(lit)
			return true
		}
	}
	return false
}

// str reads a string and returns the bounds of its contents.
func (w *actWalker) str() (start, end int, ok bool) {
	w.i++ // the opening quote
	start = w.i
	for w.i < len(w.b) {
		c := w.b[w.i]
		switch {
		case c == '"':
			end = w.i
			w.i++
			return start, end, true
		case c < 0x20:
			return 0, 0, false
		case c == '\\':
			if w.i+1 >= len(w.b) {
				return 0, 0, false
			}
			switch w.b[w.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				w.i += 2
			case 'u':
				if w.i+6 > len(w.b) {
					return 0, 0, false
				}
				for _, h := range w.b[w.i+2 : w.i+6] {
					if !isHexDigit(h) {
						return 0, 0, false
					}
				}
				w.i += 6
			default:
				return 0, 0, false
			}
		default:
			w.i++
		}
	}
	return 0, 0, false
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (w *actWalker) number() bool {
	b := w.b
	if b[w.i] == '-' {
		w.i++
	}
	digits := func() int {
		s := w.i
		for w.i < len(b) && b[w.i] >= '0' && b[w.i] <= '9' {
			w.i++
		}
		return w.i - s
	}
	if w.i < len(b) && b[w.i] == '0' {
		w.i++
	} else if digits() == 0 {
		return false
	}
	if w.i < len(b) && b[w.i] == '.' {
		w.i++
		if digits() == 0 {
			return false
		}
	}
	if w.i < len(b) && (b[w.i] == 'e' || b[w.i] == 'E') {
		w.i++
		if w.i < len(b) && (b[w.i] == '+' || b[w.i] == '-') {
			w.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// enter steps into a container: past the depth limit it fails, and an
// empty container is read whole (done). The caller leaves with w.depth--.
func (w *actWalker) enter(closer byte) (ok, done bool) {
	if w.depth >= maxActionDepth {
		return false, false
	}
	w.depth++
	w.i++
	w.ws()
	if w.i < len(w.b) && w.b[w.i] == closer {
		w.i++
		return true, true
	}
	return true, false
}

func (w *actWalker) array() bool {
	ok, done := w.enter(']')
	if !ok {
		return false
	}
	defer func() { w.depth-- }()
	if done {
		return true
	}
	for {
		w.ws()
		if !w.value() {
			return false
		}
		w.ws()
		if w.i >= len(w.b) {
			return false
		}
		switch w.b[w.i] {
		case ',':
			w.i++
		case ']':
			w.i++
			return true
		default:
			return false
		}
	}
}

func (w *actWalker) object() bool {
	ok, done := w.enter('}')
	if !ok {
		return false
	}
	defer func() { w.depth-- }()
	if done {
		return true
	}
	start, ksStart, sawKS := len(w.words), len(w.ks), false
	for {
		w.ws()
		if w.i >= len(w.b) || w.b[w.i] != '"' {
			return false
		}
		ks, ke, ok := w.str()
		if !ok {
			return false
		}
		isKS := isKeystrokesKey(w.b[ks:ke])
		w.ws()
		if w.i >= len(w.b) || w.b[w.i] != ':' {
			return false
		}
		w.i++
		w.ws()
		before := len(w.words)
		if !w.value() {
			return false
		}
		if isKS {
			sawKS = true
			w.ks = append(w.ks, w.words[before:]...)
			w.words = w.words[:before]
		}
		w.ws()
		if w.i >= len(w.b) {
			return false
		}
		switch w.b[w.i] {
		case ',':
			w.i++
			continue
		case '}':
			w.i++
			if sawKS {
				w.words = append(w.words[:start], w.ks[ksStart:]...)
			}
			w.ks = w.ks[:ksStart]
			return true
		}
		return false
	}
}

// isKeystrokesKey compares a key's raw contents with "keystrokes",
// decoding escapes when it has any.
func isKeystrokesKey(raw []byte) bool {
	if string(raw) == keystrokesKey {
		return true
	}
	for _, c := range raw {
		if c == '\\' {
			s, ok := jsonunquote.Unquote(raw)
			return ok && s == keystrokesKey
		}
	}
	return false
}
