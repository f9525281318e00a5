package realenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ToolCall is an MCP-domain action: the tool to call and its arguments.
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ParseMCPAction decodes an MCP-domain action. It accepts
// {"name", "arguments"} (MCP tools/call params), the OpenAI function-call
// shape {"type":"function","function":{"name","arguments"}} whose arguments
// may be a JSON-encoded string, and {"tool"|"tool_name", "arguments"|"args"}.
// Arguments must be a JSON object or absent. Errors wrap ErrBadAction and
// name the field.
func ParseMCPAction(action string) (ToolCall, error) {
	b := bytes.TrimSpace([]byte(action))
	if len(b) == 0 || b[0] != '{' {
		return ToolCall{}, fmt.Errorf("%w: MCP action must be a JSON object {\"name\", \"arguments\"}", ErrBadAction)
	}
	var w struct {
		Name      string          `json:"name"`
		Tool      string          `json:"tool"`
		ToolName  string          `json:"tool_name"`
		Arguments json.RawMessage `json:"arguments"`
		Args      json.RawMessage `json:"args"`
		Function  *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return ToolCall{}, fmt.Errorf("%w: MCP action: %v", ErrBadAction, err)
	}
	name, args := firstNonEmpty(w.Name, w.Tool, w.ToolName), firstRawNonNull(w.Arguments, w.Args)
	if w.Function != nil {
		name, args = firstNonEmpty(w.Function.Name, name), firstRawNonNull(w.Function.Arguments, args)
	}
	if strings.TrimSpace(name) == "" {
		return ToolCall{}, fmt.Errorf("%w: MCP action: field name: missing", ErrBadAction)
	}
	if len(args) > 0 && args[0] == '"' {
		// OpenAI encodes arguments as a JSON string.
		var s string
		if err := json.Unmarshal(args, &s); err != nil {
			return ToolCall{}, fmt.Errorf("%w: MCP action: field arguments: %v", ErrBadAction, err)
		}
		args = bytes.TrimSpace([]byte(s))
		if len(args) == 0 {
			args = nil
		}
	}
	if len(args) > 0 {
		if args[0] != '{' || !json.Valid(args) {
			return ToolCall{}, fmt.Errorf("%w: MCP action: field arguments: want a JSON object", ErrBadAction)
		}
	}
	return ToolCall{Name: name, Arguments: args}, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func firstRawNonNull(rs ...json.RawMessage) json.RawMessage {
	for _, r := range rs {
		r = bytes.TrimSpace(r)
		if len(r) > 0 && string(r) != "null" {
			return r
		}
	}
	return nil
}
