package fiction

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// Extraction heuristics. The ledger keeps only facts that are cheap to find
// and unambiguous to compare; everything else stays in the transcript.
//
//  1. JSON. Every JSON object or array in the observation is parsed: the whole
//     text, fenced ``` blocks, and balanced {…} / […] spans. Strings that
//     themselves hold JSON (the MCP text-content wrapper) are parsed too, up
//     to depth 3. An object with an id-like key names an entity; its scalar
//     members become (entity, key, value) facts; nested objects without an id
//     contribute dotted keys ("address.city") to the enclosing entity;
//     nested objects with an id are entities of their own; arrays of objects
//     are walked element by element; arrays of scalars are skipped.
//  2. "Key: value" lines. The text is split into blocks at blank lines. In a
//     block, a line "Key: value" (or "Key = value", optionally bulleted)
//     whose key is id-like names the entity; the other "Key: value" lines of
//     the block become its facts.
//
// A key is id-like when its last word is "id", "uuid", "sku" or "slug"
// ("id", "user_id", "orderId", "Employee ID"; not "paid"). The preferred id
// key of an object is "id", then the first id-like key in sorted order. An
// entity is named by its id value; a purely numeric id, which collides across
// kinds, is qualified by the object's "type"/"kind"/"object" member, else by
// the singular of its parent key, else by the id key ("issue#12",
// "order_id#7").
//
// Values are compared as text: strings trimmed, numbers as written, booleans
// as true/false. Skipped as noisy: values over 160 characters, empty values,
// and volatile keys whose last word is "at", "time", "timestamp", "ago",
// "elapsed", "duration", "latency" or "took" (updated_at, response_time).
const maxValueLen = 160

// Bounds that keep extraction linear-ish on long observations full of
// brackets (terminal screens, code): the longest JSON span considered and
// the number of candidate spans tried.
const (
	maxJSONSpan  = 1 << 16
	maxJSONTries = 256
)

// Assertion is one fact read from an observation, before it is stamped with
// its world, session and turn.
type Assertion struct {
	Entity    string `json:"entity"`
	Attribute string `json:"attribute"`
	Value     string `json:"value"`
}

// Extract reads the facts an observation asserts, deduplicated, in order of
// appearance.
func Extract(observation string) []Assertion {
	x := &extractor{seen: map[Assertion]bool{}}
	for _, v := range jsonValues(observation) {
		x.walk(v, "", "", 0)
	}
	x.lines(observation)
	return x.out
}

type extractor struct {
	out  []Assertion
	seen map[Assertion]bool
}

func (x *extractor) add(entity, attr, value string) {
	value = strings.TrimSpace(value)
	if entity == "" || attr == "" || value == "" || len(value) > maxValueLen || volatile(attr) {
		return
	}
	a := Assertion{Entity: entity, Attribute: attr, Value: value}
	if !x.seen[a] {
		x.seen[a] = true
		x.out = append(x.out, a)
	}
}

// walk visits a decoded JSON value; parentKey is the member name it hangs
// under, entity the enclosing entity (or "").
func (x *extractor) walk(v any, parentKey, entity string, depth int) {
	if depth > 12 {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		if id, key := entityName(t, parentKey); id != "" {
			x.members(t, id, key, "", depth)
			return
		}
		for _, k := range sortedMapKeys(t) {
			x.walk(t[k], k, entity, depth+1)
		}
	case []any:
		for _, e := range t {
			switch e.(type) {
			case map[string]any, []any:
				x.walk(e, parentKey, entity, depth+1)
			case string:
				x.walkString(e.(string), parentKey, entity, depth)
			}
		}
	case string:
		x.walkString(t, parentKey, entity, depth)
	}
}

// walkString parses strings that hold JSON (MCP wraps tool results in a text
// content item) and walks them.
func (x *extractor) walkString(s, parentKey, entity string, depth int) {
	s = strings.TrimSpace(s)
	if depth > 6 || len(s) < 2 || (s[0] != '{' && s[0] != '[') {
		return
	}
	if v, ok := decode(s); ok {
		x.walk(v, parentKey, entity, depth+2)
	}
}

// members records an entity object's scalar members (except its id key)
// under prefix and descends into nested values.
func (x *extractor) members(m map[string]any, entity, idKey, prefix string, depth int) {
	for _, k := range sortedMapKeys(m) {
		if k == idKey && prefix == "" {
			continue
		}
		attr := prefix + k
		switch t := m[k].(type) {
		case string:
			if s := strings.TrimSpace(t); len(s) > 1 && (s[0] == '{' || s[0] == '[') {
				x.walkString(s, k, entity, depth)
				continue
			}
			x.add(entity, attr, t)
		case json.Number:
			x.add(entity, attr, t.String())
		case bool:
			if t {
				x.add(entity, attr, "true")
			} else {
				x.add(entity, attr, "false")
			}
		case map[string]any:
			if id, _ := entityName(t, k); id != "" {
				x.walk(t, k, entity, depth+1)
			} else if depth < 12 {
				x.members(t, entity, "", attr+".", depth+1)
			}
		case []any:
			x.walk(t, k, entity, depth+1)
		}
	}
}

// entityName names the entity an object describes and returns the id key it
// used, or "" if the object has no id-like member.
func entityName(m map[string]any, parentKey string) (string, string) {
	key := ""
	if _, ok := m["id"]; ok {
		key = "id"
	} else {
		for _, k := range sortedMapKeys(m) {
			if idLike(k) {
				key = k
				break
			}
		}
	}
	if key == "" {
		return "", ""
	}
	var id string
	switch t := m[key].(type) {
	case string:
		id = strings.TrimSpace(t)
	case json.Number:
		id = t.String()
	default:
		return "", ""
	}
	if id == "" || len(id) > maxValueLen {
		return "", ""
	}
	if !numeric(id) {
		return id, key
	}
	for _, k := range []string{"type", "kind", "object"} {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" && len(s) < 40 {
			return strings.ToLower(strings.TrimSpace(s)) + "#" + id, key
		}
	}
	if parentKey != "" {
		return singular(strings.ToLower(parentKey)) + "#" + id, key
	}
	return strings.ToLower(key) + "#" + id, key
}

var kvLine = regexp.MustCompile(`^\s*(?:[-*•]\s+)?([A-Za-z][A-Za-z0-9 _./#-]{0,39}?)\s*(?::|=)\s+(\S.*?)\s*$`)

// lines applies the "Key: value" heuristic block by block.
func (x *extractor) lines(text string) {
	for _, block := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		type kv struct{ k, v string }
		var kvs []kv
		entity := ""
		for _, ln := range strings.Split(block, "\n") {
			m := kvLine.FindStringSubmatch(ln)
			if m == nil || strings.Contains(m[1], "http") {
				continue
			}
			k, v := strings.TrimSpace(m[1]), strings.TrimSpace(m[2])
			if strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[") || strings.HasPrefix(v, "//") {
				continue
			}
			if entity == "" && idLike(k) && len(v) <= maxValueLen {
				entity = strings.Trim(v, "`\"'")
				if numeric(entity) {
					entity = strings.ToLower(strings.Join(words(k), "_")) + "#" + entity
				}
				continue
			}
			kvs = append(kvs, kv{normKey(k), strings.Trim(v, "`")})
		}
		if entity == "" {
			continue
		}
		for _, p := range kvs {
			x.add(entity, p.k, p.v)
		}
	}
}

// normKey turns "Full Name" into "full_name" so line facts and JSON facts
// about one attribute compare equal.
func normKey(k string) string {
	return strings.Join(words(k), "_")
}

// words splits a key into lower-case words at spaces, punctuation and
// camelCase boundaries.
func words(k string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(k)
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
		case unicode.IsUpper(r) && i > 0 && unicode.IsLower(rs[i-1]):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return out
}

func idLike(k string) bool {
	w := words(k)
	if len(w) == 0 {
		return false
	}
	switch w[len(w)-1] {
	case "id", "uuid", "sku", "slug":
		return true
	}
	return false
}

func volatile(k string) bool {
	w := words(k)
	if len(w) == 0 {
		return false
	}
	switch w[len(w)-1] {
	case "at", "time", "timestamp", "ago", "elapsed", "duration", "latency", "took":
		return true
	}
	return false
}

func numeric(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func singular(s string) string {
	switch {
	case strings.HasSuffix(s, "ies") && len(s) > 3:
		return s[:len(s)-3] + "y"
	case strings.HasSuffix(s, "ses"), strings.HasSuffix(s, "xes"):
		return s[:len(s)-2]
	case strings.HasSuffix(s, "s") && !strings.HasSuffix(s, "ss") && len(s) > 1:
		return s[:len(s)-1]
	}
	return s
}

func sortedMapKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// decode parses one JSON document keeping numbers as written.
func decode(s string) (any, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if dec.More() {
		return nil, false
	}
	return v, true
}

// jsonValues finds the JSON documents in a text: the whole text if it is
// JSON, else every fenced block and every balanced top-level {…} or […] span
// that parses.
func jsonValues(text string) []any {
	if v, ok := decode(text); ok {
		if _, scalar := v.(string); !scalar {
			return []any{v}
		}
	}
	var out []any
	b := []byte(text)
	tries := 0
	for i := 0; i < len(b) && tries < maxJSONTries; {
		if b[i] != '{' && b[i] != '[' {
			i++
			continue
		}
		tries++
		end := matchBracket(b, i)
		if end < 0 {
			i++
			continue
		}
		if v, ok := decode(string(b[i : end+1])); ok {
			switch v.(type) {
			case map[string]any, []any:
				out = append(out, v)
			}
			i = end + 1
			continue
		}
		i++
	}
	return out
}

// matchBracket returns the index of the bracket closing b[start], honouring
// JSON strings, or -1.
func matchBracket(b []byte, start int) int {
	var stack []byte
	inStr, esc := false, false
	end := min(len(b), start+maxJSONSpan)
	for i := start; i < end; i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			stack = append(stack, c)
		case '}', ']':
			if len(stack) == 0 {
				return -1
			}
			open := stack[len(stack)-1]
			if (open == '{') != (c == '}') {
				return -1
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return i
			}
		}
		if len(stack) > 64 {
			return -1
		}
	}
	return -1
}
