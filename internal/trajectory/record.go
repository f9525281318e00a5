package trajectory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentworld/agentworld/internal/domain"
)

// ID is a record identifier kept as its JSON literal. The published data has
// integer ids beyond float64 precision and some producers write strings, so
// the value never passes through a float.
type ID struct {
	raw json.RawMessage
}

// IntID makes an ID from an integer literal given as decimal text.
func IntID(digits string) ID { return ID{raw: json.RawMessage(digits)} }

// StringID makes an ID that is a JSON string.
func StringID(s string) ID {
	b, _ := json.Marshal(s)
	return ID{raw: b}
}

// String returns the id as text: the digits of a number, the content of a
// string.
func (id ID) String() string {
	if len(id.raw) > 0 && id.raw[0] == '"' {
		var s string
		if json.Unmarshal(id.raw, &s) == nil {
			return s
		}
	}
	return string(id.raw)
}

// IsZero reports whether the id was absent.
func (id ID) IsZero() bool { return len(id.raw) == 0 }

// MarshalJSON writes the original literal.
func (id ID) MarshalJSON() ([]byte, error) {
	if len(id.raw) == 0 {
		return []byte("null"), nil
	}
	return id.raw, nil
}

// UnmarshalJSON accepts an integer literal of any size or a string.
func (id *ID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		id.raw = nil
		return nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	default:
		for i, c := range b {
			if !(c >= '0' && c <= '9' || (i == 0 && c == '-')) {
				return fmt.Errorf("id %s is neither an integer nor a string", b)
			}
		}
	}
	id.raw = append(json.RawMessage(nil), b...)
	return nil
}

// Record is one line of an AgentWorldBench file: one evaluated turn of a real
// trajectory. Fields the schema does not name are kept in Extra, in their
// original order, so a record is written back as it was read.
type Record struct {
	Task          string
	ID            ID
	Prompt        []string
	Response      []string
	CurrentPrompt string
	SystemStr     string
	TurnIdx       int
	TotalTurns    int

	// Extra holds every other top-level field, in input order.
	Extra []Field

	// order is the input order of all keys, known ones included; empty for
	// records built in code, which are written in the canonical order.
	order []string
}

// Field is a top-level JSON member the schema does not name.
type Field struct {
	Key   string
	Value json.RawMessage
}

// Sentinel errors of record validation, matched with errors.Is.
var (
	// ErrTurnRange means turn_idx does not point into the trajectory.
	ErrTurnRange = errors.New("turn_idx out of range")
	// ErrMissingField means a required field is absent or empty.
	ErrMissingField = errors.New("missing field")
)

var knownKeys = []string{"task", "id", "prompt", "response", "current_prompt", "system_str", "turn_idx", "total_turns"}

// Domain is the last '/'-separated part of Task, normalized as
// domain.FromTask does.
func (r *Record) Domain() string { return string(domain.FromTask(r.Task)) }

// Key identifies the trajectory a record belongs to; rows of one trajectory
// share it and are not independent samples.
func (r *Record) Key() string { return r.Task + "\x00" + r.ID.String() }

// Validate checks what inference and judging rely on: a task, an id, a
// turn_idx inside both prompt and response.
func (r *Record) Validate() error {
	switch {
	case r.Task == "":
		return fmt.Errorf("%w: task", ErrMissingField)
	case r.ID.IsZero():
		return fmt.Errorf("%w: id", ErrMissingField)
	case r.TurnIdx < 1:
		return fmt.Errorf("%w: turn_idx %d < 1", ErrTurnRange, r.TurnIdx)
	case r.TurnIdx > len(r.Prompt):
		return fmt.Errorf("%w: turn_idx %d but prompt has %d entries", ErrTurnRange, r.TurnIdx, len(r.Prompt))
	case r.TurnIdx > len(r.Response):
		return fmt.Errorf("%w: turn_idx %d but response has %d entries", ErrTurnRange, r.TurnIdx, len(r.Response))
	}
	return nil
}

// GroundTruth is the real observation of the evaluated turn.
func (r *Record) GroundTruth() string { return r.Response[r.TurnIdx-1] }

// UnmarshalJSON decodes a record, keeping unknown fields and key order.
//
// Rows average ~185 KB, nearly all of it the prompt and response strings.
// The common record is decoded in one pass over its bytes (decodeDirect);
// what that pass declines goes to one encoding/json pass over the schema
// fields (which also validates the whole input) with a byte scan for the
// key order and the unknown members' raw bytes. Anything that pass cannot
// decide exactly as the member-by-member decoder would (a type error, a
// key differing from a known one only in case, which encoding/json would
// match) goes to that decoder, so all give the same record or the same
// error.
func (r *Record) UnmarshalJSON(b []byte) error {
	if r.decodeDirect(b) {
		return nil
	}
	if err := r.unmarshalFast(b); err != nil {
		if !json.Valid(b) {
			return err
		}
		return r.unmarshalByMember(b)
	}
	return nil
}

// recordFields are the schema fields of a record as encoding/json decodes
// them in one pass; null leaves a field at its zero value, as
// unmarshalByMember does.
type recordFields struct {
	Task          string   `json:"task"`
	ID            ID       `json:"id"`
	Prompt        []string `json:"prompt"`
	Response      []string `json:"response"`
	CurrentPrompt string   `json:"current_prompt"`
	SystemStr     string   `json:"system_str"`
	TurnIdx       int      `json:"turn_idx"`
	TotalTurns    int      `json:"total_turns"`
}

// errSlowPath sends a record the fast pass cannot decide to
// unmarshalByMember.
var errSlowPath = errors.New("record needs the member-by-member decoder")

func (r *Record) unmarshalFast(b []byte) error {
	if i := skipSpace(b, 0); i >= len(b) || b[i] != '{' {
		return errSlowPath
	}
	var f recordFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*r = Record{Task: f.Task, ID: f.ID, Prompt: f.Prompt, Response: f.Response, CurrentPrompt: f.CurrentPrompt,
		SystemStr: f.SystemStr, TurnIdx: f.TurnIdx, TotalTurns: f.TotalTurns}
	return scanMembers(b, func(key string, raw []byte) error {
		r.order = append(r.order, key)
		if slices.Contains(knownKeys, key) {
			return nil
		}
		for _, k := range knownKeys {
			if strings.EqualFold(k, key) {
				return errSlowPath
			}
		}
		r.Extra = append(r.Extra, Field{Key: key, Value: append(json.RawMessage(nil), raw...)})
		return nil
	})
}

// scanMembers calls fn with each member of b, a JSON object already known
// to be valid, in order: the unquoted key and the value's exact bytes.
func scanMembers(b []byte, fn func(key string, raw []byte) error) error {
	i := skipSpace(b, 0) + 1
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] == '}' {
			return nil
		}
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		end := stringEnd(b, i)
		key := string(b[i+1 : end-1])
		if bytes.IndexByte(b[i:end], '\\') >= 0 || !utf8.Valid(b[i+1:end-1]) {
			if err := json.Unmarshal(b[i:end], &key); err != nil {
				return err
			}
		}
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // the colon
		vend := valueEnd(b, i)
		if err := fn(key, b[i:vend]); err != nil {
			return err
		}
		i = vend
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string opening at b[i].
func stringEnd(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		q := j + k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// valueEnd returns the index just past the JSON value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// unmarshalByMember decodes a record one member at a time; it defines what
// a record is and which error a bad one gets.
func (r *Record) unmarshalByMember(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("record is not a JSON object")
	}
	*r = Record{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		key := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
		r.order = append(r.order, key)
		if err := r.setKnown(key, raw); err != nil {
			return fmt.Errorf("field %q: %w", key, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	return nil
}

func (r *Record) setKnown(key string, raw json.RawMessage) error {
	isNull := string(bytes.TrimSpace(raw)) == "null"
	switch key {
	case "task":
		if isNull {
			return nil
		}
		return json.Unmarshal(raw, &r.Task)
	case "id":
		return r.ID.UnmarshalJSON(raw)
	case "prompt":
		return json.Unmarshal(raw, &r.Prompt)
	case "response":
		return json.Unmarshal(raw, &r.Response)
	case "current_prompt":
		if isNull {
			return nil
		}
		return json.Unmarshal(raw, &r.CurrentPrompt)
	case "system_str":
		if isNull {
			return nil
		}
		return json.Unmarshal(raw, &r.SystemStr)
	case "turn_idx":
		return json.Unmarshal(raw, &r.TurnIdx)
	case "total_turns":
		if isNull {
			return nil
		}
		return json.Unmarshal(raw, &r.TotalTurns)
	}
	r.Extra = append(r.Extra, Field{Key: key, Value: append(json.RawMessage(nil), raw...)})
	return nil
}

// MarshalJSON writes the record with keys in input order (canonical order for
// records built in code), without HTML escaping.
func (r Record) MarshalJSON() ([]byte, error) {
	order := r.order
	if len(order) == 0 {
		order = append([]string(nil), knownKeys...)
		for _, f := range r.Extra {
			order = append(order, f.Key)
		}
	}
	extra := make(map[string]json.RawMessage, len(r.Extra))
	for _, f := range r.Extra {
		extra[f.Key] = f.Value
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	seen := make(map[string]bool, len(order))
	first := true
	write := func(key string, v any) error {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		kb, _ := marshalNoEscape(key)
		buf.Write(kb)
		buf.WriteByte(':')
		if raw, ok := v.(json.RawMessage); ok {
			buf.Write(raw)
			return nil
		}
		vb, err := marshalNoEscape(v)
		if err != nil {
			return err
		}
		buf.Write(vb)
		return nil
	}
	for _, key := range order {
		if seen[key] {
			continue
		}
		seen[key] = true
		var err error
		switch key {
		case "task":
			err = write(key, r.Task)
		case "id":
			err = write(key, r.ID)
		case "prompt":
			err = write(key, nonNil(r.Prompt))
		case "response":
			err = write(key, nonNil(r.Response))
		case "current_prompt":
			err = write(key, r.CurrentPrompt)
		case "system_str":
			err = write(key, r.SystemStr)
		case "turn_idx":
			err = write(key, r.TurnIdx)
		case "total_turns":
			err = write(key, r.TotalTurns)
		default:
			v, ok := extra[key]
			if !ok {
				continue
			}
			err = write(key, v)
		}
		if err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// marshalNoEscape encodes v without HTML escaping and without the trailing
// newline json.Encoder adds.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Marshal encodes any value as compact JSON without HTML escaping; use it for
// every line agentworld writes so '<', '>' and '&' stay readable.
func Marshal(v any) ([]byte, error) { return marshalNoEscape(v) }
