package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

// decodeStrict decodes one JSON object, rejecting unknown fields and
// trailing data, with errors naming the field.
func decodeStrict(body []byte, v any, allowEmpty bool) error {
	if len(bytes.TrimSpace(body)) == 0 {
		if allowEmpty {
			return nil
		}
		return badRequest("body", "empty; expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonFieldError(err)
	}
	if dec.More() {
		return badRequest("body", "trailing data after the JSON object")
	}
	return nil
}

// jsonFieldError turns encoding/json errors into 400s naming the field.
func jsonFieldError(err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := te.Field
		if f == "" {
			f = "body"
		}
		return badRequest(f, "expected %s, got JSON %s", te.Type.String(), te.Value)
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		f := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		return badRequest(f, "unknown field")
	}
	return badRequest("body", "not valid JSON: %v", err)
}

// toCreate converts the wire request; the inline spec is parsed and
// validated within m's bounds (sim.Manager.ParseInlineSpec), with errors
// naming world.<field>.
func toCreate(m *sim.Manager, r api.CreateSessionRequest) (sim.CreateRequest, error) {
	c := sim.CreateRequest{WorldID: r.WorldID, Seed: r.Seed, Model: r.Model, Backend: r.Backend, Params: r.Params, Labels: r.Labels}
	raw := bytes.TrimSpace(r.World)
	if len(raw) > 0 && string(raw) != "null" {
		if raw[0] == '"' { // a world name given as "world"
			var name string
			if err := json.Unmarshal(raw, &name); err != nil {
				return c, badRequest("world", "%v", err)
			}
			if c.WorldID != "" {
				return c, badRequest("world", "give either world or world_id, not both")
			}
			c.WorldID = name
		} else {
			spec, err := parseInlineSpec(m, raw)
			if err != nil {
				return c, err
			}
			c.World = spec
		}
	}
	if r.Shadow != "" {
		if c.Params == nil {
			c.Params = map[string]json.RawMessage{}
		}
		b, _ := json.Marshal(r.Shadow)
		c.Params["shadow"] = b
	}
	return c, nil
}

func parseInlineSpec(m *sim.Manager, raw []byte) (*world.Spec, error) {
	if raw[0] != '{' {
		return nil, badRequest("world", "must be a world spec object or a world name")
	}
	return m.ParseInlineSpec(raw)
}

// openEnvDecode decodes an OpenEnv request body into v, a pointer to one
// of the OpenEnv request structs of package api, and returns the top-level fields v has no
// place for as labels. OpenEnv's ResetRequest and StepRequest models allow
// extra fields (its own examples send "render": true, and reset(difficulty=
// …) sends difficulty), so a client may send them; they are kept with the
// session (reset) or the step rather than refused. A string value is kept
// as its text, any other value as its JSON.
func openEnvDecode(body []byte, v any, allowEmpty bool) (map[string]string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		if allowEmpty {
			return nil, nil
		}
		return nil, badRequest("body", "empty; expected a JSON object")
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil {
		return nil, jsonFieldError(err)
	}
	if dec.More() {
		return nil, badRequest("body", "trailing data after the JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return nil, jsonFieldError(err)
	}
	known := jsonFields(reflect.TypeOf(v).Elem())
	var extra map[string]string
	for k, raw := range fields {
		if known[k] {
			continue
		}
		if extra == nil {
			extra = map[string]string{}
		}
		var str string
		if json.Unmarshal(raw, &str) == nil {
			extra[k] = str
		} else {
			extra[k] = string(raw)
		}
	}
	return extra, nil
}

// jsonFields is the set of JSON names of a struct type's fields.
func jsonFields(t reflect.Type) map[string]bool {
	known := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		known[name] = true
	}
	return known
}

// openEnvAction turns an OpenEnv action object into our action value:
// {"action": X} gives X; OpenEnv's MCP {"type": "call_tool", "tool_name",
// "arguments"} gives a tool call; any other object is the action itself
// (e.g. {"name": …, "arguments": …}).
func openEnvAction(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("action", "missing")
	}
	if raw[0] != '{' {
		return raw, nil // lenient: a bare string or array
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, badRequest("action", "not valid JSON: %v", err)
	}
	if a, ok := obj["action"]; ok {
		return a, nil
	}
	if kind, _ := openEnvToolAction(raw); kind == "call_tool" {
		var c struct {
			ToolName  string          `json:"tool_name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(raw, &c); err != nil || c.ToolName == "" {
			return nil, badRequest("action.tool_name", "missing")
		}
		if len(c.Arguments) == 0 {
			c.Arguments = json.RawMessage(`{}`)
		}
		b, _ := json.Marshal(map[string]json.RawMessage{"name": mustRaw(c.ToolName), "arguments": c.Arguments})
		return b, nil
	}
	return raw, nil
}

func mustRaw(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// openEnvResult converts a step result.
func openEnvResult(id string, r *sim.StepResult) api.OpenEnvResult {
	reward := r.Reward
	return api.OpenEnvResult{
		Observation: api.OpenEnvObservation{Text: r.Observation, Turn: r.Info.Turn, SessionID: id, Truncated: r.Truncated},
		Reward:      &reward,
		Done:        r.Terminated || r.Truncated,
		Metadata:    infoMap(r.Info),
	}
}

// openEnvReply converts a create/fork reply.
func openEnvReply(r *sim.Reply) api.OpenEnvResult {
	return api.OpenEnvResult{
		Observation: api.OpenEnvObservation{Text: r.Observation, Turn: r.Info.Turn, SessionID: r.SessionID, Truncated: r.Info.Truncated},
		Done:        r.Info.Terminated || r.Info.Truncated,
		Metadata:    infoMap(r.Info),
	}
}

func infoMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// openEnvSchema is GET /schema's reply.
func openEnvSchema() map[string]any {
	return map[string]any{
		"action": map[string]any{
			"type":  "object",
			"title": "AgentWorldAction",
			"properties": map[string]any{
				"action": map[string]any{
					"description": "The agent's action in the world's domain: Terminal a JSON array of {keystrokes, duration}; MCP/Search/SWE a tool call {name, arguments} (or plain text to finish); Web a browser command string; Android an action; OS Python code.",
					"anyOf":       []any{map[string]any{"type": "string"}, map[string]any{"type": "array"}, map[string]any{"type": "object"}},
				},
				"session_id": map[string]any{"type": "string", "description": "Session to step (or episode_id); defaults to the one named by the openenv_session cookie /reset set."},
			},
			"required": []any{"action"},
		},
		"observation": map[string]any{
			"type":  "object",
			"title": "AgentWorldObservation",
			"properties": map[string]any{
				"text":       map[string]any{"type": "string"},
				"turn":       map[string]any{"type": "integer"},
				"session_id": map[string]any{"type": "string"},
				"truncated":  map[string]any{"type": "boolean"},
			},
			"required": []any{"text", "turn", "session_id"},
		},
		"state": map[string]any{
			"type":  "object",
			"title": "AgentWorldState",
			"properties": map[string]any{
				"episode_id":       map[string]any{"type": "string"},
				"step_count":       map[string]any{"type": "integer"},
				"world":            map[string]any{"type": "string"},
				"domain":           map[string]any{"type": "string"},
				"backend":          map[string]any{"type": "string"},
				"status":           map[string]any{"type": "string"},
				"last_observation": map[string]any{"type": "string"},
			},
		},
	}
}

func describeWorld(s *world.Spec) map[string]any {
	tools := make([]string, 0, len(s.ActionSpace.Tools))
	for _, t := range s.ActionSpace.Tools {
		tools = append(tools, t.Name)
	}
	m := map[string]any{"name": s.Name, "domain": s.Domain, "description": s.Description}
	if len(tools) > 0 {
		m["tools"] = tools
	}
	if s.Backend != "" {
		m["backend"] = s.Backend
	}
	return m
}
