package trajectory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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

// ActionPrompt renders turn n's action as AgentWorldBench records show it:
// "### Turn n\n**Action:**\n" and the action. An action already in that form
// (one taken from a record) is returned as is.
func ActionPrompt(n int, action string) string {
	if strings.HasPrefix(action, "### Turn ") {
		return action
	}
	return fmt.Sprintf("### Turn %d\n**Action:**\n%s", n, action)
}

// ObservationResponse renders an observation as AgentWorldBench records show
// it, opened by the observation marker.
func ObservationResponse(obs string) string {
	if strings.HasPrefix(obs, domain.ObservationMarker) {
		return obs
	}
	return domain.ObservationMarker + "\n" + obs
}

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
func (r *Record) UnmarshalJSON(b []byte) error {
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
