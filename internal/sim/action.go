package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Action is one agent action, validated for its domain and rendered
// canonically: the same action always renders to the same bytes (JSON with
// sorted keys, no HTML escaping), which keeps prompts prefix-stable.
type Action struct {
	// Text is the canonical rendering, recorded and shown to the model.
	Text string
	// Tool is the parsed call in tool domains (MCP, Search, SWE); nil for a
	// plain-text final answer or a list of calls.
	Tool *ToolCall
	// Keystrokes are the parsed keystroke groups of a Terminal action.
	Keystrokes []Keystroke
	// End means the action ends the episode by the domain's rule.
	End bool
	// EndReason says which rule.
	EndReason string
}

// ToolCall is a tool invocation.
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Keystroke is one group of a Terminal action: text sent to tmux (tmux key
// notation) and how long the agent waits afterwards, in seconds.
type Keystroke struct {
	Keys     string
	Duration float64
}

var (
	webCall = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*\(`)
)

// ParseAction validates a raw action for domain d and renders it. raw is
// the JSON value the client sent: a string (the action text, which may
// itself be JSON) or a JSON array/object. Errors are *FieldError naming
// "action".
//
// Episode-ending rules by domain:
//   - terminal: the empty keystroke list [] ends the task;
//   - mcp, search, swe: a plain-text answer instead of a tool call is the
//     agent's final answer;
//   - web: send_msg_to_user(…) or report_infeasible(…);
//   - android: {"action_type": "status", …} (task complete or infeasible);
//   - os: the special actions DONE and FAIL.
func ParseAction(d domain.Domain, raw json.RawMessage) (Action, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return Action{}, badField("action", "missing")
	}
	var text string
	isJSONValue := raw[0] != '"'
	if !isJSONValue {
		if err := json.Unmarshal(raw, &text); err != nil {
			return Action{}, badField("action", "not a valid JSON string: %v", err)
		}
	} else {
		if !json.Valid(raw) {
			return Action{}, badField("action", "not valid JSON")
		}
		text = string(raw)
	}
	// Invalid UTF-8 becomes U+FFFD, as JSON decoding does, so the
	// canonical text survives a JSON round trip unchanged.
	text = strings.ToValidUTF8(text, "\uFFFD")
	if strings.TrimSpace(text) == "" {
		return Action{}, badField("action", "empty")
	}
	switch d {
	case domain.Terminal:
		return parseTerminal(text)
	case domain.MCP, domain.Search, domain.SWE:
		return parseToolAction(text)
	case domain.Web:
		return parseWeb(text, isJSONValue)
	case domain.Android:
		return parseAndroid(text)
	case domain.OS:
		return parseOS(text, isJSONValue)
	}
	return Action{}, badField("domain", "unknown domain %q", d)
}

// decodeJSON decodes one JSON value keeping number literals exact.
func decodeJSON(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	var extra any
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// Canonical renders a decoded JSON value compactly with sorted object keys
// and without HTML escaping.
func Canonical(v any) string {
	b, _ := trajectory.Marshal(v) // values come from decodeJSON: always encodable
	return string(b)
}

func parseTerminal(text string) (Action, error) {
	const shape = `a Terminal action must be a JSON array of {"keystrokes": string, "duration": seconds} objects`
	v, err := decodeJSON(text)
	if err != nil {
		return Action{}, badField("action", "%s: %v", shape, err)
	}
	arr, ok := v.([]any)
	if !ok {
		return Action{}, badField("action", "%s, got %s", shape, jsonKind(v))
	}
	a := Action{Text: Canonical(arr)}
	if len(arr) == 0 {
		a.End, a.EndReason = true, "the agent sent [] (task finished)"
		return a, nil
	}
	for i, el := range arr {
		obj, ok := el.(map[string]any)
		if !ok {
			return Action{}, badField(fmt.Sprintf("action[%d]", i), "%s, got %s", shape, jsonKind(el))
		}
		keys, ok := obj["keystrokes"].(string)
		if !ok {
			return Action{}, badField(fmt.Sprintf("action[%d].keystrokes", i), "missing or not a string")
		}
		k := Keystroke{Keys: keys}
		if d, present := obj["duration"]; present {
			n, ok := d.(json.Number)
			if !ok {
				return Action{}, badField(fmt.Sprintf("action[%d].duration", i), "not a number")
			}
			f, err := n.Float64()
			if err != nil || f < 0 {
				return Action{}, badField(fmt.Sprintf("action[%d].duration", i), "not a non-negative number")
			}
			k.Duration = f
		}
		a.Keystrokes = append(a.Keystrokes, k)
	}
	return a, nil
}

func parseToolAction(text string) (Action, error) {
	t := strings.TrimSpace(text)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return Action{Text: text, End: true, EndReason: "the agent answered without a tool call"}, nil
	}
	v, err := decodeJSON(t)
	if err != nil {
		return Action{}, badField("action", "a tool call must be a JSON object {\"name\": tool, \"arguments\": {…}}: %v", err)
	}
	if arr, ok := v.([]any); ok {
		if len(arr) == 0 {
			return Action{}, badField("action", "empty list of tool calls")
		}
		calls := make([]any, len(arr))
		for i, el := range arr {
			c, err := normalizeCall(el, fmt.Sprintf("action[%d]", i))
			if err != nil {
				return Action{}, err
			}
			calls[i] = c
		}
		return Action{Text: Canonical(calls)}, nil
	}
	c, err := normalizeCall(v, "action")
	if err != nil {
		return Action{}, err
	}
	args, _ := json.Marshal(c["arguments"])
	return Action{Text: Canonical(c), Tool: &ToolCall{Name: c["name"].(string), Arguments: args}}, nil
}

// normalizeCall accepts {"name", "arguments"}, {"tool", "arguments"} and
// OpenAI's {"function": {"name", "arguments": "<json>"}} and returns
// {"name", "arguments"} with arguments an object.
func normalizeCall(v any, field string) (map[string]any, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, badField(field, "a tool call must be a JSON object, got %s", jsonKind(v))
	}
	if fn, ok := obj["function"].(map[string]any); ok {
		obj = fn
	}
	name, _ := obj["name"].(string)
	if name == "" {
		name, _ = obj["tool"].(string)
	}
	if strings.TrimSpace(name) == "" {
		return nil, badField(field+".name", "missing tool name")
	}
	args := obj["arguments"]
	if args == nil {
		args = obj["args"]
	}
	if s, ok := args.(string); ok {
		parsed, err := decodeJSON(s)
		if err != nil {
			return nil, badField(field+".arguments", "a string that is not JSON: %v", err)
		}
		args = parsed
	}
	if args == nil {
		args = map[string]any{}
	}
	if _, ok := args.(map[string]any); !ok {
		return nil, badField(field+".arguments", "must be a JSON object, got %s", jsonKind(args))
	}
	return map[string]any{"name": name, "arguments": args}, nil
}

func parseWeb(text string, isJSONValue bool) (Action, error) {
	if isJSONValue {
		return Action{}, badField("action", "a Web action is a string of browser commands such as click(\"12\")")
	}
	first := ""
	for _, line := range strings.Split(text, "\n") {
		if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
			first = s
			break
		}
	}
	if !webCall.MatchString(first) {
		return Action{}, badField("action", "a Web action must be a browser command such as click(\"12\") or goto(\"https://…\"), got %q", clip(first, 60))
	}
	a := Action{Text: text}
	if strings.Contains(text, "send_msg_to_user(") || strings.Contains(text, "report_infeasible(") {
		a.End, a.EndReason = true, "the agent sent its answer to the user"
	}
	return a, nil
}

func parseAndroid(text string) (Action, error) {
	t := strings.TrimSpace(text)
	if t[0] != '{' {
		return Action{Text: text}, nil
	}
	v, err := decodeJSON(t)
	if err != nil {
		return Action{}, badField("action", "an Android action in JSON must be one object: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Action{}, badField("action", "an Android action in JSON must be an object")
	}
	a := Action{Text: Canonical(obj)}
	if at, _ := obj["action_type"].(string); at == "status" {
		a.End, a.EndReason = true, "the agent reported the task status"
	}
	return a, nil
}

func parseOS(text string, isJSONValue bool) (Action, error) {
	if isJSONValue {
		return Action{}, badField("action", "an OS action is Python code (a string), or DONE / FAIL")
	}
	a := Action{Text: text}
	switch strings.TrimSpace(text) {
	case "DONE", "FAIL":
		a.End, a.EndReason = true, "the agent declared the task "+strings.ToLower(strings.TrimSpace(text))
	}
	return a, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
