package trajectory

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentworld/agentworld/internal/jsonunquote"
)

// decodeDirect decodes the common record in one pass over its bytes: an
// object whose keys are plain (no escapes, each at most once, none matching
// a known key only in case) and whose known members have their usual types.
// It reports false for anything else, valid or not, and UnmarshalJSON then
// decodes as before, so it never decides an error and never gives another
// record than encoding/json would: strings are unquoted as encoding/json
// does (invalid UTF-8 and lone surrogates become U+FFFD), numbers are only
// integers that fit an int, and an unknown member is kept only when
// json.Valid accepts its bytes.
//
// It exists for speed: encoding/json scans a row twice (validation, then
// decoding) and a bench run decodes ~185 KB rows at the rate it sends
// requests; this takes about a third of the CPU on such rows
// (BenchmarkRecordDecode).
func (r *Record) decodeDirect(b []byte) bool {
	d := directDecoder{b: b}
	d.space()
	if !d.byte('{') {
		return false
	}
	var out Record
	var seen [8]bool // knownKeys already met
	d.space()
	if d.peek() == '}' {
		d.i++
	} else {
		for {
			d.space()
			key, ok := d.plainKey()
			if !ok {
				return false
			}
			d.space()
			if !d.byte(':') {
				return false
			}
			d.space()
			k := knownIndex(key)
			if k >= 0 {
				if seen[k] {
					return false
				}
				seen[k] = true
				if !d.known(&out, key) {
					return false
				}
			} else {
				for _, kk := range knownKeys {
					if strings.EqualFold(kk, key) {
						return false
					}
				}
				start := d.i
				if !d.skipValue() || !json.Valid(b[start:d.i]) {
					return false
				}
				out.Extra = append(out.Extra, Field{Key: key, Value: append(json.RawMessage(nil), b[start:d.i]...)})
			}
			out.order = append(out.order, key)
			d.space()
			if d.byte(',') {
				continue
			}
			if d.byte('}') {
				break
			}
			return false
		}
	}
	d.space()
	if d.i != len(b) {
		return false
	}
	*r = out
	return true
}

func knownIndex(key string) int {
	for i, k := range knownKeys {
		if k == key {
			return i
		}
	}
	return -1
}

// directDecoder is a cursor over a record's bytes.
type directDecoder struct {
	b []byte
	i int
}

func (d *directDecoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *directDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// space skips JSON whitespace.
func (d *directDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// null consumes a null literal.
func (d *directDecoder) null() bool {
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// plainKey reads a key of printable ASCII without escapes (other keys go
// the slow way).
func (d *directDecoder) plainKey() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			key := string(d.b[start:d.i])
			d.i++
			return key, true
		case c == '\\' || c < ' ' || c >= utf8.RuneSelf:
			return "", false
		}
		d.i++
	}
	return "", false
}

// known decodes the value of a schema member into out.
func (d *directDecoder) known(out *Record, key string) bool {
	switch key {
	case "task", "current_prompt", "system_str":
		if d.null() {
			return true
		}
		s, ok := d.str()
		if !ok {
			return false
		}
		switch key {
		case "task":
			out.Task = s
		case "current_prompt":
			out.CurrentPrompt = s
		default:
			out.SystemStr = s
		}
		return true
	case "prompt", "response":
		if d.null() {
			return true
		}
		list, ok := d.strings()
		if !ok {
			return false
		}
		if key == "prompt" {
			out.Prompt = list
		} else {
			out.Response = list
		}
		return true
	case "turn_idx", "total_turns":
		if d.null() {
			return true
		}
		n, ok := d.integer()
		if !ok {
			return false
		}
		if key == "turn_idx" {
			out.TurnIdx = n
		} else {
			out.TotalTurns = n
		}
		return true
	case "id":
		start := d.i
		switch c := d.peek(); {
		case c == 'n':
			if !d.null() {
				return false
			}
		case c == '"':
			if _, ok := d.str(); !ok {
				return false
			}
		case c == '-' || ('0' <= c && c <= '9'):
			if !d.number() {
				return false
			}
		default:
			return false
		}
		return out.ID.UnmarshalJSON(d.b[start:d.i]) == nil
	}
	return false
}

// strings reads an array of strings; [] gives an empty, non-nil slice, as
// encoding/json does.
func (d *directDecoder) strings() ([]string, bool) {
	if !d.byte('[') {
		return nil, false
	}
	list := []string{}
	d.space()
	if d.byte(']') {
		return list, true
	}
	for {
		d.space()
		s, ok := d.str()
		if !ok {
			return nil, false
		}
		list = append(list, s)
		d.space()
		if d.byte(',') {
			continue
		}
		if d.byte(']') {
			return list, true
		}
		return nil, false
	}
}

// integer reads -?(0|[1-9][0-9]*) that fits an int; a fraction or exponent
// (a type error for encoding/json) is left to the slow way.
func (d *directDecoder) integer() (int, bool) {
	start := d.i
	if !d.number() {
		return 0, false
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 0)
	if err != nil {
		return 0, false
	}
	return int(n), true
}

// number consumes a JSON number.
func (d *directDecoder) number() bool {
	d.byte('-')
	switch c := d.peek(); {
	case c == '0':
		d.i++
	case '1' <= c && c <= '9':
		d.digits()
	default:
		return false
	}
	if d.byte('.') {
		if !d.digits() {
			return false
		}
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.i++
		if c := d.peek(); c == '+' || c == '-' {
			d.i++
		}
		if !d.digits() {
			return false
		}
	}
	return true
}

func (d *directDecoder) digits() bool {
	start := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// str reads a JSON string and unquotes it exactly as encoding/json does.
func (d *directDecoder) str() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	end := jsonunquote.End(d.b[d.i:])
	if end < 0 {
		return "", false
	}
	s := d.b[d.i : d.i+end]
	d.i += end + 1
	return jsonunquote.Unquote(s)
}

// skipValue moves past one JSON value without checking it (json.Valid
// does, on the bytes it spans).
func (d *directDecoder) skipValue() bool {
	if d.i >= len(d.b) {
		return false
	}
	d.i = valueEnd(d.b, d.i)
	return true
}
