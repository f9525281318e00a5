package masking

// A small, allocation-free walker over one trajectory JSON line, used by the
// mask fast path. It accepts only the plain shape of the schema; anything
// unusual (unknown or repeated keys, wrong types, escapes in keys, blank
// text) makes it give up, and the caller falls back to the strict decoder,
// so both paths classify every line the same way.

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/agentworld/agentworld/internal/jsonunquote"
)

type walker struct {
	b   []byte
	i   int
	bad bool
}

func (w *walker) ws() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

func (w *walker) peek() byte {
	w.ws()
	if w.i >= len(w.b) {
		w.bad = true
		return 0
	}
	return w.b[w.i]
}

func (w *walker) expect(c byte) {
	if w.peek() != c {
		w.bad = true
		return
	}
	w.i++
}

// str reads a string literal and returns its inside (escapes kept) and
// whether it has any escape.
func (w *walker) str() ([]byte, bool) {
	if w.peek() != '"' {
		w.bad = true
		return nil, false
	}
	w.i++
	start := w.i
	esc := false
	for {
		j := bytes.IndexAny(w.b[w.i:], "\"\\")
		if j < 0 {
			w.bad = true
			return nil, false
		}
		w.i += j
		if w.b[w.i] == '"' {
			s := w.b[start:w.i]
			w.i++
			for _, c := range s {
				if c < 0x20 {
					w.bad = true
					return nil, false
				}
			}
			return s, esc
		}
		esc = true
		_, n, ok := jsonunquote.Escape(w.b[w.i:])
		if !ok {
			w.bad = true
			return nil, false
		}
		w.i += n
	}
}

// skip passes over any JSON value.
func (w *walker) skip(depth int) {
	if depth > 200 {
		w.bad = true
		return
	}
	switch c := w.peek(); {
	case w.bad:
	case c == '"':
		w.str()
	case c == '{':
		w.i++
		if w.peek() == '}' {
			w.i++
			return
		}
		for !w.bad {
			w.str()
			w.expect(':')
			w.skip(depth + 1)
			if w.peek() == ',' {
				w.i++
				continue
			}
			w.expect('}')
			return
		}
	case c == '[':
		w.i++
		if w.peek() == ']' {
			w.i++
			return
		}
		for !w.bad {
			w.skip(depth + 1)
			if w.peek() == ',' {
				w.i++
				continue
			}
			w.expect(']')
			return
		}
	case c == 't':
		w.lit("true")
	case c == 'f':
		w.lit("false")
	case c == 'n':
		w.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		start := w.i
		for w.i < len(w.b) && strings.IndexByte("+-.eE0123456789", w.b[w.i]) >= 0 {
			w.i++
		}
		var f json.Number
		if json.Unmarshal(w.b[start:w.i], &f) != nil {
			w.bad = true
		}
	default:
		w.bad = true
	}
}

func (w *walker) lit(s string) {
	if !bytes.HasPrefix(w.b[w.i:], []byte(s)) {
		w.bad = true
		return
	}
	w.i += len(s)
}

// object walks the members of an object, calling member for each key; the
// callback must consume the value.
func (w *walker) object(member func(key []byte)) {
	w.expect('{')
	if w.bad {
		return
	}
	if w.peek() == '}' {
		w.i++
		return
	}
	for !w.bad {
		k, esc := w.str()
		if esc {
			w.bad = true
			return
		}
		w.expect(':')
		if w.bad {
			return
		}
		member(k)
		if w.peek() == ',' {
			w.i++
			continue
		}
		w.expect('}')
		return
	}
}

// rawBlank reports whether the inside of a string literal is empty or all
// whitespace (as strings.TrimSpace sees it).
func rawBlank(raw []byte, esc bool) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if c == '\\' || c >= 0x80 {
			var s string
			if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) != nil {
				return false
			}
			return strings.TrimSpace(s) == ""
		}
		return false
	}
	return true
}

// rawTurn is one turn found by the walker.
type rawTurn struct {
	action, observation       []byte
	actionEsc, observationEsc bool
}

// rawTrajectory is what the mask fast path needs of a line.
type rawTrajectory struct {
	id, domain []byte // string literals with their quotes
	turns      []rawTurn
}

// walkTrajectory fills rt from line and reports whether the fast path may
// use it; false means "use the strict decoder".
func walkTrajectory(line []byte, rt *rawTrajectory) bool {
	w := walker{b: line}
	rt.id, rt.domain, rt.turns = nil, nil, rt.turns[:0]
	var seen uint16
	hasSystem := false
	once := func(bit uint16) bool {
		if seen&bit != 0 {
			w.bad = true
			return false
		}
		seen |= bit
		return true
	}
	literal := func() ([]byte, []byte, bool) {
		w.ws()
		start := w.i
		s, esc := w.str()
		if w.bad {
			return nil, nil, false
		}
		return line[start:w.i], s, esc
	}
	w.object(func(k []byte) {
		switch string(k) {
		case "id":
			if once(1) {
				rt.id, _, _ = literal()
			}
		case "domain":
			if once(2) {
				var s []byte
				var esc bool
				rt.domain, s, esc = literal()
				if !w.bad && rawBlank(s, esc) {
					w.bad = true
				}
			}
		case "source":
			if once(4) {
				w.str()
			}
		case "system_prompt":
			if once(8) {
				s, esc := w.str()
				if !w.bad && !rawBlank(s, esc) {
					hasSystem = true
				}
			}
		case "components":
			if once(16) {
				hasSystem = true
				w.components()
			}
		case "meta":
			if once(32) {
				w.optObject()
			}
		case "turns":
			if !once(64) {
				return
			}
			w.expect('[')
			if w.bad {
				return
			}
			if w.peek() == ']' {
				w.bad = true // no turns: let the strict path report it
				return
			}
			for !w.bad {
				var t rawTurn
				var ts uint8
				w.object(func(k []byte) {
					switch string(k) {
					case "action":
						if ts&1 != 0 {
							w.bad = true
						}
						ts |= 1
						t.action, t.actionEsc = w.str()
					case "observation":
						if ts&2 != 0 {
							w.bad = true
						}
						ts |= 2
						t.observation, t.observationEsc = w.str()
					case "meta":
						if ts&4 != 0 {
							w.bad = true
						}
						ts |= 4
						w.optObject()
					default:
						w.bad = true
					}
				})
				if ts&3 != 3 || w.bad || rawBlank(t.action, t.actionEsc) || rawBlank(t.observation, t.observationEsc) {
					w.bad = true
					return
				}
				rt.turns = append(rt.turns, t)
				if w.peek() == ',' {
					w.i++
					continue
				}
				w.expect(']')
				return
			}
		default:
			w.bad = true
		}
	})
	w.ws()
	if w.i != len(w.b) {
		w.bad = true
	}
	return !w.bad && hasSystem && seen&2 != 0 && seen&64 != 0
}

// optObject accepts null or an object of any content.
func (w *walker) optObject() {
	switch w.peek() {
	case 'n':
		w.lit("null")
	case '{':
		w.skip(0)
	default:
		w.bad = true
	}
}

// components accepts the plain shape of the five components; anything else
// goes to the strict decoder.
func (w *walker) components() {
	var seen uint8
	w.object(func(k []byte) {
		var bit uint8
		switch string(k) {
		case "task_description":
			bit = 1
		case "action_space":
			bit = 2
		case "initial_state":
			bit = 4
		case "simulation_instruction":
			bit = 8
		default:
			w.bad = true
			return
		}
		if seen&bit != 0 {
			w.bad = true
		}
		seen |= bit
		w.str()
	})
}

func jsonUnmarshalString(lit []byte, s *string) error { return json.Unmarshal(lit, s) }
