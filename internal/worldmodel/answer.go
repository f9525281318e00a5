package worldmodel

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentworld/agentworld/internal/jsonunquote"
)

// Reading a chat completion answer without reflection.
//
// encoding/json was about a sixth of the client's CPU per call (serve's
// profile): a validating pass over the body, then a reflective decode that
// allocates per field. Almost every answer has one shape — one choice, its
// message's content (and maybe reasoning), the finish reason, usage, the
// model, and fields the client does not read — so scanAnswer reads that
// shape in one pass and hands anything else to encoding/json, which stays
// the definition of what an answer means (FuzzScanAnswer holds the two to
// the same result).

// maxSkipDepth is how deep scanAnswer follows nesting inside a field it
// does not read; deeper answers go to encoding/json.
const maxSkipDepth = 64

// answerScanner is a position in an answer body.
type answerScanner struct {
	b []byte
	i int
}

// scanAnswer reads body as decodeAnswer does when the body is an object
// with exactly one choice, whose fields are spelled as the wire format
// spells them (encoding/json also matches other cases of a name) and each
// appears at most once, every value the client reads is of its type or
// null, every integer is one without fraction or exponent that fits an
// int, and every string read is one encoding/json reads.
// ok is false for any other body; the caller decodes those with
// encoding/json. model is the model asked for: an answer naming it shares
// its string rather than allocating one.
func scanAnswer(body []byte, model string) (resp *Response, ok bool) {
	s := answerScanner{b: body}
	r := &Response{}
	var content, reasoningContent, reasoning string
	choices := 0
	var seen fieldSet
	ok = s.object(func(key []byte) bool {
		switch string(key) {
		case "model":
			return seen.first(0) && s.str(&r.Model, model)
		case "choices":
			return seen.first(1) && s.array(func() bool {
				if choices++; choices > 1 {
					return false
				}
				var seen fieldSet
				return s.object(func(key []byte) bool {
					switch string(key) {
					case "message":
						var seenMsg fieldSet
						return seen.first(0) && s.object(func(key []byte) bool {
							switch string(key) {
							case "content":
								return seenMsg.first(0) && s.str(&content)
							case "reasoning_content":
								return seenMsg.first(1) && s.rawString(&reasoningContent)
							case "reasoning":
								return seenMsg.first(2) && s.rawString(&reasoning)
							}
							return s.other(key, "content", "reasoning_content", "reasoning")
						})
					case "finish_reason":
						return seen.first(1) && s.str(&r.FinishReason, "stop", "length")
					}
					return s.other(key, "message", "finish_reason")
				})
			})
		case "usage":
			var seenUsage fieldSet
			return seen.first(2) && s.object(func(key []byte) bool {
				switch string(key) {
				case "prompt_tokens":
					return seenUsage.first(0) && s.int(&r.PromptTokens)
				case "completion_tokens":
					return seenUsage.first(1) && s.int(&r.CompletionTokens)
				case "prompt_tokens_details":
					var seenDetails fieldSet
					return seenUsage.first(2) && s.object(func(key []byte) bool {
						if string(key) == "cached_tokens" {
							return seenDetails.first(0) && s.int(&r.CachedTokens)
						}
						return s.other(key, "cached_tokens")
					})
				}
				return s.other(key, "prompt_tokens", "completion_tokens", "prompt_tokens_details")
			})
		}
		return s.other(key, "model", "choices", "usage")
	})
	if !ok || choices != 1 || s.space() != len(body) {
		return nil, false
	}
	r.Content = content
	r.Reasoning = reasoningContent
	if r.Reasoning == "" {
		r.Reasoning = reasoning
	}
	return r, true
}

// fieldSet records which of an object's fields were read.
type fieldSet uint8

// first marks field n as read, reporting whether it was not before.
func (f *fieldSet) first(n uint) bool {
	if *f&(1<<n) != 0 {
		return false
	}
	*f |= 1 << n
	return true
}

// space skips white space and returns the position after it.
func (s *answerScanner) space() int {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return s.i
		}
	}
	return s.i
}

// literal consumes lit if it is next.
func (s *answerScanner) literal(lit string) bool {
	s.space()
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// object reads an object (or null), calling field for each member with
// the scanner at its value, which field consumes. A key with an escape or
// a byte outside ASCII fails the scan: encoding/json unescapes keys and
// matches them with Unicode case folding.
func (s *answerScanner) object(field func(key []byte) bool) bool {
	if s.literal("null") {
		return true
	}
	if !s.literal("{") {
		return false
	}
	if s.literal("}") {
		return true
	}
	for {
		s.space()
		end := s.plainEnd()
		if end < 0 || end == len(s.b) || s.b[end] != '"' {
			return false
		}
		key := s.b[s.i+1 : end]
		s.i = end + 1
		if !s.literal(":") || !field(key) {
			return false
		}
		if s.literal(",") {
			continue
		}
		return s.literal("}")
	}
}

// array reads an array (or null), calling elem with the scanner at each
// element, which elem consumes.
func (s *answerScanner) array(elem func() bool) bool {
	if s.literal("null") {
		return true
	}
	if !s.literal("[") {
		return false
	}
	if s.literal("]") {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.literal(",") {
			continue
		}
		return s.literal("]")
	}
}

// other skips the value of a field the client does not read, failing for
// a key encoding/json would match to one of names (it ignores case).
func (s *answerScanner) other(key []byte, names ...string) bool {
	for _, n := range names {
		if strings.EqualFold(string(key), n) {
			return false
		}
	}
	return s.skip(0)
}

// plainEnd returns the index of the first byte of the string at s.i that
// is a quote, a backslash, a control character or outside ASCII; -1 when
// no string starts at s.i. Keys are read so.
func (s *answerScanner) plainEnd() int {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return -1
	}
	j := s.i + 1
	for j < len(s.b) && plainByte[s.b[j]] {
		j++
	}
	return j
}

// plainByte marks the bytes a string holds as themselves.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string into dst; null leaves dst as it is, as encoding/json
// does. A string without escapes equal to one of known is set to that one
// rather than a new copy.
func (s *answerScanner) str(dst *string, known ...string) bool {
	if s.literal("null") {
		return true
	}
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	from := s.i + 1
	end := jsonunquote.End(s.b[from:])
	if end < 0 {
		return false
	}
	raw := s.b[from : from+end]
	for _, k := range known {
		if string(raw) == k {
			*dst, s.i = k, from+end+1
			return true
		}
	}
	v, ok := jsonunquote.Unquote(raw)
	if !ok {
		return false
	}
	*dst, s.i = v, from+end+1
	return true
}

// run returns the index of the first quote, backslash or control character
// at or after j, or len(s.b).
func (s *answerScanner) run(j int) int {
	for j < len(s.b) && !special[s.b[j]] {
		j++
	}
	return j
}

// special marks the bytes that end a run of a string's literal bytes.
var special = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// rawString reads a field that encoding/json keeps raw: a string is
// decoded into dst, any other value is skipped, leaving dst as it is.
func (s *answerScanner) rawString(dst *string) bool {
	if s.space(); s.i < len(s.b) && s.b[s.i] == '"' {
		return s.str(dst)
	}
	return s.skip(0)
}

// int reads an integer into dst; null leaves dst as it is. Only integers
// of at most 18 digits, without fraction or exponent, are read here.
func (s *answerScanner) int(dst *int) bool {
	if s.literal("null") {
		return true
	}
	j, neg := s.i, false
	if j < len(s.b) && s.b[j] == '-' {
		j, neg = j+1, true
	}
	digits := j
	n := 0
	for j < len(s.b) && '0' <= s.b[j] && s.b[j] <= '9' {
		n = n*10 + int(s.b[j]-'0')
		j++
	}
	if d := j - digits; d == 0 || d > 18 || strconv.IntSize == 32 && d > 9 || d > 1 && s.b[digits] == '0' {
		return false
	}
	if j < len(s.b) && (s.b[j] == '.' || s.b[j] == 'e' || s.b[j] == 'E') {
		return false
	}
	if neg {
		n = -n
	}
	*dst, s.i = n, j
	return true
}

// skip consumes one JSON value of any kind, checking it is valid JSON.
func (s *answerScanner) skip(depth int) bool {
	if s.space() >= len(s.b) || depth > maxSkipDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(func([]byte) bool { return s.skip(depth + 1) })
	case c == '[':
		return s.array(func() bool { return s.skip(depth + 1) })
	case c == '"':
		return s.skipString()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.number()
}

// skipString consumes a string as JSON spells one. Its bytes are not
// checked for UTF-8: encoding/json accepts any.
func (s *answerScanner) skipString() bool {
	for j := s.i + 1; ; j++ {
		if j = s.run(j); j == len(s.b) {
			return false
		}
		switch s.b[j] {
		case '"':
			s.i = j + 1
			return true
		case '\\':
			_, n, ok := jsonunquote.Escape(s.b[j:])
			if !ok {
				return false
			}
			j += n - 1
		default:
			return false
		}
	}
}

// number consumes a number as JSON spells one.
func (s *answerScanner) number() bool {
	b, j := s.b, s.i
	digits := func() int {
		from := j
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
		return j - from
	}
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case digits() == 0:
		return false
	}
	if j < len(b) && b[j] == '.' {
		j++
		if digits() == 0 {
			return false
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return false
		}
	}
	s.i = j
	return true
}
