package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

// Native session API wire types.

// CreateSessionRequest is the body of POST /v1/sessions.
type CreateSessionRequest struct {
	// World is an inline world spec (an object in the world-spec schema).
	World json.RawMessage `json:"world,omitempty"`
	// WorldID names a loaded world.
	WorldID string `json:"world_id,omitempty"`
	Seed    *int64 `json:"seed,omitempty"`
	Model   string `json:"model,omitempty"`
	Backend string `json:"backend,omitempty"`
	// Shadow asks a backend that supports it to run a second environment
	// beside the first (e.g. "real"); stored in params["shadow"].
	Shadow string                     `json:"shadow,omitempty"`
	Params map[string]json.RawMessage `json:"params,omitempty"`
	Labels map[string]string          `json:"labels,omitempty"`
}

// StepSessionRequest is the body of POST /v1/sessions/{id}/step.
type StepSessionRequest struct {
	// Action is the agent's action: a string, or JSON (a keystroke list, a
	// tool call object).
	Action json.RawMessage `json:"action"`
	// Turn makes the step idempotent (see sim.StepRequest).
	Turn int `json:"turn,omitempty"`
	// Control is extra simulation instruction for this step only.
	Control    string            `json:"control,omitempty"`
	WorldState string            `json:"world_state,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// ForkSessionRequest is the body of POST /v1/sessions/{id}/fork (optional).
type ForkSessionRequest struct {
	AtTurn int               `json:"at_turn,omitempty"`
	Seed   *int64            `json:"seed,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

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
func toCreate(m *sim.Manager, r CreateSessionRequest) (sim.CreateRequest, error) {
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

// OpenEnv wire types. They match huggingface/OpenEnv's HTTP server
// (formerly meta-pytorch/OpenEnv; src/openenv/core/env_server/
// http_server.py and types.py, checked again at commit 385de5eb; the
// messages its clients send are pinned in testdata/openenv):
// POST /reset {seed?, episode_id?, …extra} →
// {observation, reward, done, metadata?}; POST /step {action: {…},
// timeout_s?, request_id?, …extra} → the same shape; GET /state →
// {episode_id, step_count, …}; GET /health → {status: "healthy"}; GET
// /schema → {action, observation, state} JSON schemas; WebSocket /ws with
// client messages {type: "reset"|"step"|"state"|"close", data} and server
// messages {type: "observation"|"state"|"error", data}. Observations carry
// reward and done beside the observation object and metadata with our step
// info.

// OpenEnvResetRequest is POST /reset's body and a WebSocket reset's data.
// Beyond OpenEnv's seed and episode_id it accepts the world to run and,
// on a WebSocket, session_id to attach to an existing session.
type OpenEnvResetRequest struct {
	Seed      *int64          `json:"seed,omitempty"`
	EpisodeID string          `json:"episode_id,omitempty"`
	WorldID   string          `json:"world_id,omitempty"`
	World     json.RawMessage `json:"world,omitempty"`
	Model     string          `json:"model,omitempty"`
	Backend   string          `json:"backend,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
}

// OpenEnvStepRequest is POST /step's body. SessionID (or EpisodeID)
// selects the session; without either, the session named by the
// openenv_session cookie the client's /reset was answered with (see
// [Server.openEnvSession]).
type OpenEnvStepRequest struct {
	Action    json.RawMessage `json:"action"`
	TimeoutS  *float64        `json:"timeout_s,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	EpisodeID string          `json:"episode_id,omitempty"`
	Turn      int             `json:"turn,omitempty"`
}

// OpenEnvResult is the body of /reset and /step replies and the data of a
// WebSocket observation message.
type OpenEnvResult struct {
	Observation OpenEnvObservation `json:"observation"`
	Reward      *float64           `json:"reward"`
	Done        bool               `json:"done"`
	Metadata    map[string]any     `json:"metadata,omitempty"`
}

// OpenEnvObservation is the observation object of our environments.
type OpenEnvObservation struct {
	Text      string `json:"text"`
	Turn      int    `json:"turn"`
	SessionID string `json:"session_id"`
	Truncated bool   `json:"truncated"`
}

// OpenEnvWSMessage is one WebSocket frame in either direction.
type OpenEnvWSMessage struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// openEnvDecode decodes an OpenEnv request body into v, a pointer to one
// of the request structs above, and returns the top-level fields v has no
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
	var typ string
	if t, ok := obj["type"]; ok {
		_ = json.Unmarshal(t, &typ)
	}
	if typ == "call_tool" {
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
func openEnvResult(id string, r *sim.StepResult) OpenEnvResult {
	reward := r.Reward
	return OpenEnvResult{
		Observation: OpenEnvObservation{Text: r.Observation, Turn: r.Info.Turn, SessionID: id, Truncated: r.Truncated},
		Reward:      &reward,
		Done:        r.Terminated || r.Truncated,
		Metadata:    infoMap(r.Info),
	}
}

// openEnvReply converts a create/fork reply.
func openEnvReply(r *sim.Reply) OpenEnvResult {
	return OpenEnvResult{
		Observation: OpenEnvObservation{Text: r.Observation, Turn: r.Info.Turn, SessionID: r.SessionID, Truncated: r.Info.Truncated},
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
