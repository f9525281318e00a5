// Package world describes simulated environments: a world spec names the
// domain and the five components of the unified system prompt
// (task_description, action_space, initial_state, demonstrations,
// simulation_instruction), loaded from YAML or JSON files.
package world

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/perturb"
)

// Spec is one environment in the unified trajectory schema.
type Spec struct {
	// Name identifies the world (world_id in the session API); defaults to
	// the file name without extension.
	Name   string        `json:"name,omitempty"`
	Domain domain.Domain `json:"domain"`
	// Description is a one-line summary for listings; not sent to the model.
	Description     string          `json:"description,omitempty"`
	TaskDescription string          `json:"task_description"`
	ActionSpace     ActionSpace     `json:"action_space"`
	InitialState    string          `json:"initial_state,omitempty"`
	Demonstrations  []Demonstration `json:"demonstrations,omitempty"`
	// SimulationInstruction overrides the domain's default simulation rules.
	SimulationInstruction string    `json:"simulation_instruction,omitempty"`
	Sampling              *Sampling `json:"sampling,omitempty"`
	// Perturbations are controllable failure rules applied step by step
	// (overridable per session); nil means none.
	Perturbations *perturb.Config `json:"perturbations,omitempty"`
	// Facts define an invented world every session starts from; nil means
	// none.
	Facts *fiction.Facts `json:"facts,omitempty"`
	// Backend names what produces observations for sessions of this world:
	// "" means the server's default (the world model, or replay when no
	// model is configured); other names are registered by environment
	// packages (e.g. "replay", "real:terminal").
	Backend string `json:"backend,omitempty"`
	// MaxTurns ends an episode as truncated after this many steps; 0 means
	// the server's limit.
	MaxTurns int `json:"max_turns,omitempty"`
	// Reward holds per-step rules and an episode-success criterion; nil
	// means every step's reward is 0 (unless a real task's check decides).
	Reward *Reward `json:"reward,omitempty"`
}

// ToolNames lists the action space's tool names in definition order.
func (s *Spec) ToolNames() []string {
	names := make([]string, len(s.ActionSpace.Tools))
	for i, t := range s.ActionSpace.Tools {
		names[i] = t.Name
	}
	return names
}

// ActionSpace is what the agent may do: tool definitions (MCP, Search, SWE)
// or a textual action list (Terminal, Android, Web, OS), or both. In a file it
// may be written as a string, a list of tools, or an object with both.
type ActionSpace struct {
	Tools       []Tool `json:"tools,omitempty"`
	Description string `json:"description,omitempty"`
}

// IsEmpty reports an action space that defines nothing.
func (a ActionSpace) IsEmpty() bool {
	return len(a.Tools) == 0 && strings.TrimSpace(a.Description) == ""
}

// Tool finds a tool by name.
func (a ActionSpace) Tool(name string) (Tool, bool) {
	for _, t := range a.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// UnmarshalJSON accepts a string, a list of tools or an object.
func (a *ActionSpace) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		*a = ActionSpace{}
		return nil
	case b[0] == '"':
		*a = ActionSpace{}
		return json.Unmarshal(b, &a.Description)
	case b[0] == '[':
		*a = ActionSpace{}
		return json.Unmarshal(b, &a.Tools)
	}
	type plain ActionSpace
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*a = ActionSpace(p)
	return nil
}

// Tool is a tool definition as MCP and OpenAI function calling describe it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// OutputSchema, when set, makes MCP results carry structured content.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// UnmarshalJSON also accepts MCP's camelCase inputSchema / outputSchema and
// OpenAI's {"type":"function","function":{…,"parameters":…}} wrapper.
func (t *Tool) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name          string          `json:"name"`
		Description   string          `json:"description"`
		InputSchema   json.RawMessage `json:"input_schema"`
		InputSchemaC  json.RawMessage `json:"inputSchema"`
		Parameters    json.RawMessage `json:"parameters"`
		OutputSchema  json.RawMessage `json:"output_schema"`
		OutputSchemaC json.RawMessage `json:"outputSchema"`
		Function      *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*t = Tool{Name: raw.Name, Description: raw.Description}
	t.InputSchema = firstRaw(raw.InputSchema, raw.InputSchemaC, raw.Parameters)
	t.OutputSchema = firstRaw(raw.OutputSchema, raw.OutputSchemaC)
	if raw.Function != nil {
		t.Name, t.Description = raw.Function.Name, raw.Function.Description
		t.InputSchema = firstRaw(t.InputSchema, raw.Function.Parameters)
	}
	return nil
}

func firstRaw(rs ...json.RawMessage) json.RawMessage {
	for _, r := range rs {
		if len(r) > 0 && string(r) != "null" {
			return r
		}
	}
	return nil
}

// Demonstration is one example transition shown to the world model.
type Demonstration struct {
	Action      string `json:"action"`
	Observation string `json:"observation"`
}

// Sampling overrides generation settings for a world; nil fields keep the
// server's defaults.
type Sampling struct {
	Temperature *float64       `json:"temperature,omitempty"`
	TopP        *float64       `json:"top_p,omitempty"`
	MaxTokens   int            `json:"max_tokens,omitempty"`
	Extra       map[string]any `json:"extra_body,omitempty"`
}

// ReservedExtraKeys are the request fields sampling.extra_body may never
// set, in any spec: they are the request itself (the model, the
// conversation, the number and shape of answers) or have their own
// settings, and extra_body fields are written over the request as sent.
var ReservedExtraKeys = []string{
	"model", "messages", "prompt", "n", "best_of", "stream", "stream_options", "echo",
	"max_tokens", "max_completion_tokens", "temperature", "top_p", "seed",
	"tools", "tool_choice", "functions", "function_call", "response_format",
	"logprobs", "top_logprobs", "logit_bias", "user",
}

// validate checks the sampling settings: limits in range, and extra_body
// keys that are plain top-level names (the model client sets them by path,
// so "a.b" or "messages.0" would edit inside the request) and none of
// ReservedExtraKeys.
func (sp *Sampling) validate() error {
	if sp == nil {
		return nil
	}
	if sp.MaxTokens < 0 {
		return bad("sampling.max_tokens", "negative")
	}
	for _, k := range slices.Sorted(maps.Keys(sp.Extra)) {
		field := "sampling.extra_body." + k
		if !plainKey(k) {
			return bad(field, "not a plain field name (letters, digits, _ and -)")
		}
		if slices.Contains(ReservedExtraKeys, k) {
			return bad(field, "a field of the request itself; extra_body may not set it")
		}
	}
	return nil
}

// plainKey reports a JSON field name with no path syntax in it.
func plainKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// ErrInvalid wraps every spec validation failure.
var ErrInvalid = errors.New("invalid world spec")

// bad is the error of a spec field that is wrong: a [fielderr.Error] of
// kind ErrInvalid.
func bad(field, format string, args ...any) error {
	return fielderr.New(ErrInvalid, field, format, args...)
}

// Validate checks the spec names a known domain and the components the
// simulator cannot do without.
func (s *Spec) Validate() error {
	if s.Domain == "" {
		return bad("domain", "missing")
	}
	if _, err := domain.Parse(string(s.Domain)); err != nil {
		return fielderr.Wrap(ErrInvalid, "domain", err)
	}
	if strings.TrimSpace(s.TaskDescription) == "" {
		return bad("task_description", "missing")
	}
	if s.ActionSpace.IsEmpty() {
		return bad("action_space", "missing: give tool definitions or an action list")
	}
	seen := map[string]bool{}
	for i, t := range s.ActionSpace.Tools {
		if t.Name == "" {
			return bad(fmt.Sprintf("action_space.tools[%d].name", i), "missing")
		}
		if seen[t.Name] {
			return bad(fmt.Sprintf("action_space.tools[%d].name", i), "duplicate tool %q", t.Name)
		}
		seen[t.Name] = true
		if len(t.InputSchema) > 0 && !json.Valid(t.InputSchema) {
			return bad(fmt.Sprintf("action_space.tools[%d].input_schema", i), "not valid JSON")
		}
	}
	for i, d := range s.Demonstrations {
		if strings.TrimSpace(d.Action) == "" {
			return bad(fmt.Sprintf("demonstrations[%d].action", i), "missing")
		}
	}
	if s.MaxTurns < 0 {
		return bad("max_turns", "negative")
	}
	if err := s.Sampling.validate(); err != nil {
		return err
	}
	if err := s.Reward.validate(); err != nil {
		return err
	}
	if err := s.Perturbations.Validate(s.ToolNames()); err != nil {
		return fielderr.Under(ErrInvalid, "perturbations", err)
	}
	if err := s.Facts.Validate(); err != nil {
		return fielderr.Under(ErrInvalid, "facts", err)
	}
	return s.validateCompiled()
}

// Parse reads a spec from YAML or JSON bytes and validates it; name is used
// in errors and as the default world name. Valid JSON is decoded as JSON
// directly: JSON is also YAML, but the YAML road costs a hundred times the
// CPU and memory of the JSON one on a large spec (see
// BenchmarkParseLargeSpec), which an inline spec from a client must not be
// able to buy. Anything else (a YAML flow mapping too) is read as YAML.
func Parse(data []byte, name string) (*Spec, error) {
	js := bytes.TrimLeft(data, " \t\r\n")
	if len(js) == 0 || js[0] != '{' || !json.Valid(js) {
		var err error
		if js, err = yaml.YAMLToJSON(data); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return decode(js, name)
}

// decode decodes and validates a spec from JSON.
func decode(js []byte, name string) (*Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: trailing data after the spec object", name)
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	}
	s.Domain = domain.Domain(strings.ToLower(string(s.Domain)))
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &s, nil
}

// Load reads and validates a spec file (.yaml, .yml or .json).
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// LoadDir loads every spec file of a directory, keyed by world name.
func LoadDir(dir string) (map[string]*Spec, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]*Spec{}
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		s, err := Load(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if prev, dup := out[s.Name]; dup {
			return nil, fmt.Errorf("%s: world name %q already used by another spec in %s (%s)", e.Name(), s.Name, dir, prev.Name)
		}
		out[s.Name] = s
	}
	return out, nil
}
