package conversation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/fielderr"
)

// ErrBadAction is what every malformed action unwraps to, whichever
// parser found it; errors.Is matches it.
var ErrBadAction = errors.New("malformed action")

// badField says which part of an action is wrong: a [fielderr.Error] of
// kind ErrBadAction whose path starts at the action's root: "action",
// "action[2].duration", "action.arguments" ("call" for a command-line call
// of [ParseToolCallLine]).
func badField(field, format string, args ...any) error {
	return fielderr.New(ErrBadAction, field, format, args...)
}

// Action is one agent action, validated for its domain and rendered
// canonically: the same action always renders to the same bytes (JSON with
// sorted keys, no HTML escaping), which keeps prompts prefix-stable.
type Action struct {
	// Text is the canonical rendering, recorded and shown to the model.
	Text string
	// Tool is the parsed call in tool domains (MCP, Search, SWE); nil for a
	// plain-text final answer or a list of calls.
	Tool *ToolCall
	// Keystrokes are the parsed keystroke groups of a Terminal action; a
	// group without a duration has 0.
	Keystrokes []Keystroke
	// End means the action ends the episode by the domain's rule.
	End bool
	// EndReason says which rule.
	EndReason string
}

// ToolCall is a tool invocation: the action of the MCP, Search and SWE
// domains, and the params of an MCP tools/call.
type ToolCall struct {
	Name string `json:"name"`
	// Arguments is a JSON object in canonical form ([Canonical]), or nil
	// when the call gave none.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Keystroke is one element of a Terminal action: text or tmux key names to
// type, then how long to wait, in seconds, before the next element. Its JSON
// form is the published one, {"keystrokes", "duration"}.
type Keystroke struct {
	Keystrokes string  `json:"keystrokes"`
	Duration   float64 `json:"duration"`
}

var webCall = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*\(`)

// ParseAction validates a raw action for domain d and renders it. raw is
// the JSON value the client sent: a string (the action text, which may
// itself be JSON) or a JSON array/object. Errors are [fielderr.Error]s with a
// field path under "action".
//
// Episode-ending rules by domain:
//   - terminal: the empty keystroke list [] ends the task;
//   - mcp, search, swe: a plain-text answer instead of a tool call is the
//     agent's final answer;
//   - web: send_msg_to_user(…) or report_infeasible(…);
//   - android: {"action_type": "status", …} (task complete or infeasible);
//   - os: the special actions DONE and FAIL.
func ParseAction(d domain.Domain, raw json.RawMessage) (Action, error) {
	if t := bytes.TrimSpace(raw); d == domain.Terminal && len(t) > 0 {
		text := string(t)
		if t[0] == '"' { // the action as a JSON string holding its text
			v, end, ok := scanPlainString(text, 0)
			if !ok || end != len(t) {
				return parseAction(d, raw)
			}
			text = v
		}
		if a, ok := scanTerminal(text); ok {
			return a, nil
		}
	}
	return parseAction(d, raw)
}

// parseAction is ParseAction by decoding into generic values, for every
// action scanTerminal does not take.
func parseAction(d domain.Domain, raw json.RawMessage) (Action, error) {
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
	// Only white space may follow. (Decoder.More is false before a
	// stray '}' or ']', so it cannot tell.)
	if strings.TrimLeft(s[dec.InputOffset():], " \t\r\n") != "" {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// Canonical renders a decoded JSON value compactly with sorted object keys
// and without HTML escaping. Numbers decoded as json.Number keep their
// literal.
func Canonical(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // values come from decodeJSON: always encodable
	return strings.TrimSuffix(buf.String(), "\n")
}

// CanonicalJSON renders JSON text canonically ([Canonical]); an error means
// s is not exactly one JSON value.
func CanonicalJSON(s string) (string, error) {
	v, err := decodeJSON(s)
	if err != nil {
		return "", err
	}
	return Canonical(v), nil
}

// member finds an object member the way encoding/json matches struct
// fields: the exact key, else one equal under case folding, so
// {"Keystrokes": …} or {"Name": …} mean what they would to a Go client.
func member(obj map[string]any, key string) (any, bool) {
	if v, ok := obj[key]; ok {
		return v, true
	}
	for k, v := range obj {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return nil, false
}

const terminalShape = `a Terminal action must be a JSON array of {"keystrokes": string, "duration": seconds} objects`

// ParseKeystrokes reads the text of a Terminal action: a JSON array of
// {"keystrokes", "duration"} objects; a missing or null duration becomes
// defaultDuration. `[]` is valid and means the agent ends the task. It is
// the parser behind [ParseAction] for the Terminal domain (which uses
// duration 0) and undoes [RenderKeystrokes].
func ParseKeystrokes(text string, defaultDuration float64) ([]Keystroke, error) {
	v, err := decodeJSON(text)
	if err != nil {
		return nil, badField("action", "%s: %v", terminalShape, err)
	}
	return keystrokes(v, defaultDuration)
}

func keystrokes(v any, defaultDuration float64) ([]Keystroke, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, badField("action", "%s, got %s", terminalShape, jsonKind(v))
	}
	out := make([]Keystroke, 0, len(arr))
	for i, el := range arr {
		obj, ok := el.(map[string]any)
		if !ok {
			return nil, badField(fmt.Sprintf("action[%d]", i), "%s, got %s", terminalShape, jsonKind(el))
		}
		ks, _ := member(obj, "keystrokes")
		keys, ok := ks.(string)
		if !ok {
			return nil, badField(fmt.Sprintf("action[%d].keystrokes", i), "missing or not a string")
		}
		k := Keystroke{Keystrokes: keys, Duration: defaultDuration}
		if d, _ := member(obj, "duration"); d != nil {
			n, ok := d.(json.Number)
			if !ok {
				return nil, badField(fmt.Sprintf("action[%d].duration", i), "not a number")
			}
			f, err := n.Float64()
			if err != nil || f < 0 {
				return nil, badField(fmt.Sprintf("action[%d].duration", i), "not a non-negative number of seconds")
			}
			k.Duration = f
		}
		out = append(out, k)
	}
	return out, nil
}

// RenderKeystrokes writes a Terminal action as an agent sends it: a JSON
// array of {"keystrokes", "duration"} in that order, no HTML escaping.
// [ParseKeystrokes] reads it back.
func RenderKeystrokes(ks []Keystroke) string {
	if ks == nil {
		ks = []Keystroke{}
	}
	return Canonical(ks)
}

func parseTerminal(text string) (Action, error) {
	v, err := decodeJSON(text)
	if err != nil {
		return Action{}, badField("action", "%s: %v", terminalShape, err)
	}
	ks, err := keystrokes(v, 0)
	if err != nil {
		return Action{}, err
	}
	// The canonical text keeps every member the agent sent: it is what the
	// world model sees, and the published data shows actions whole.
	a := Action{Text: Canonical(v)}
	if len(ks) == 0 {
		a.End, a.EndReason = true, "the agent sent [] (task finished)"
		return a, nil
	}
	a.Keystrokes = ks
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
			calls[i] = c.canonical()
		}
		return Action{Text: Canonical(calls)}, nil
	}
	c, err := normalizeCall(v, "action")
	if err != nil {
		return Action{}, err
	}
	tc := c.toolCall()
	return Action{Text: Canonical(c.canonical()), Tool: &tc}, nil
}

// ParseToolCall reads exactly one tool call, the action of a real MCP
// environment, in any of the shapes [ParseAction] accepts for one call.
func ParseToolCall(text string) (ToolCall, error) {
	const shape = "a tool call must be a JSON object {\"name\": tool, \"arguments\": {…}}"
	t := strings.TrimSpace(text)
	if t == "" || t[0] != '{' {
		return ToolCall{}, badField("action", shape)
	}
	v, err := decodeJSON(t)
	if err != nil {
		return ToolCall{}, badField("action", "%s: %v", shape, err)
	}
	c, err := normalizeCall(v, "action")
	if err != nil {
		return ToolCall{}, err
	}
	return c.toolCall(), nil
}

// call is a tool call with its aliases resolved.
type call struct {
	name string
	args map[string]any // never nil
	// given is false when the call had no arguments (absent, null or "").
	given bool
}

// canonical is the value whose rendering is the call's action text.
func (c call) canonical() map[string]any {
	return map[string]any{"name": c.name, "arguments": c.args}
}

func (c call) toolCall() ToolCall {
	tc := ToolCall{Name: c.name}
	if c.given {
		tc.Arguments = json.RawMessage(Canonical(c.args))
	}
	return tc
}

// normalizeCall accepts {"name"|"tool"|"tool_name", "arguments"|"args"}
// (keys matched as encoding/json matches struct fields) and OpenAI's
// {"type": "function", "function": {"name", "arguments": "<json>"}}, whose
// inner members win over outer ones. Arguments must be an object; given as
// a JSON string they are decoded, and an empty string is none.
func normalizeCall(v any, field string) (call, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return call{}, badField(field, "a tool call must be a JSON object, got %s", jsonKind(v))
	}
	name := firstString(obj, "name", "tool", "tool_name")
	args := firstPresent(obj, "arguments", "args")
	if f, _ := member(obj, "function"); f != nil {
		if fn, ok := f.(map[string]any); ok {
			if n := firstString(fn, "name", "tool", "tool_name"); n != "" {
				name = n
			}
			if a := firstPresent(fn, "arguments", "args"); a != nil {
				args = a
			}
		}
	}
	if strings.TrimSpace(name) == "" {
		return call{}, badField(field+".name", "missing tool name")
	}
	if s, ok := args.(string); ok {
		if strings.TrimSpace(s) == "" {
			args = nil
		} else {
			parsed, err := decodeJSON(s)
			if err != nil {
				return call{}, badField(field+".arguments", "a string that is not JSON: %v", err)
			}
			args = parsed
		}
	}
	if args == nil {
		return call{name: name, args: map[string]any{}}, nil
	}
	obj, ok = args.(map[string]any)
	if !ok {
		return call{}, badField(field+".arguments", "must be a JSON object, got %s", jsonKind(args))
	}
	return call{name: name, args: obj, given: true}, nil
}

// firstString is the first of keys whose member is a non-empty string.
func firstString(obj map[string]any, keys ...string) string {
	for _, k := range keys {
		if v, _ := member(obj, k); v != nil {
			if s, ok := v.(string); ok && s != "" {
				return s
			}
		}
	}
	return ""
}

// firstPresent is the first of keys whose member is present and not null.
func firstPresent(obj map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, _ := member(obj, k); v != nil {
			return v
		}
	}
	return nil
}

// RenderToolCall is the canonical action text of a tool call, as the
// simulator records it: {"arguments": {…}, "name": …} with sorted keys,
// compact, no HTML escaping. Empty or null arguments render as {}.
// [ParseAction] gives the same text back for it, and [ParseToolCall] the
// call.
func RenderToolCall(name string, args json.RawMessage) (string, error) {
	var a any = map[string]any{}
	if t := bytes.TrimSpace(args); len(t) > 0 && string(t) != "null" {
		v, err := decodeJSON(string(t))
		if err != nil {
			return "", fmt.Errorf("tool %s arguments: %w", name, err)
		}
		a = v
	}
	return Canonical(map[string]any{"name": name, "arguments": a}), nil
}

// ParseToolCallLine reads the command-line form of a tool call, `TOOL` or
// `TOOL {json arguments}` (as `agentworld world import --call` takes it).
// Arguments are kept as given.
func ParseToolCallLine(s string) (ToolCall, error) {
	s = strings.TrimSpace(s)
	name, rest, _ := strings.Cut(s, " ")
	if name == "" {
		return ToolCall{}, badField("call", "missing tool name (want `TOOL {\"arg\": …}`)")
	}
	c := ToolCall{Name: name}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return c, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(rest), &obj); err != nil {
		return ToolCall{}, badField("call", "%s: arguments must be one JSON object: %v", name, err)
	}
	c.Arguments = json.RawMessage(rest)
	return c, nil
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
	if name := first[:strings.IndexByte(first, '(')]; !slices.Contains(webActions, name) {
		return Action{}, badField("action", "%q is not a browser command; want one of %s", clip(name, 60), strings.Join(webActions, ", "))
	}
	a := Action{Text: text}
	if strings.Contains(text, "send_msg_to_user(") || strings.Contains(text, "report_infeasible(") {
		a.End, a.EndReason = true, "the agent sent its answer to the user"
	}
	return a, nil
}

// webActions are BrowserGym's high-level browser commands (its full action
// set: bid-based, coordinate-based, tab and navigation, and chat), the
// commands a Web action may start with.
var webActions = []string{
	"noop", "scroll", "fill", "select_option", "click", "dblclick", "hover", "press", "focus", "clear",
	"drag_and_drop", "upload_file", "goto", "go_back", "go_forward", "new_tab", "tab_close", "tab_focus",
	"send_msg_to_user", "report_infeasible",
	"mouse_move", "mouse_up", "mouse_down", "mouse_click", "mouse_dblclick", "mouse_drag_and_drop", "mouse_upload_file",
	"keyboard_down", "keyboard_up", "keyboard_press", "keyboard_type", "keyboard_insert_text",
}

// androidActionTypes are AndroidWorld's JSON action types, the values an
// Android action object's action_type may take.
var androidActionTypes = []string{
	"click", "double_tap", "long_press", "scroll", "swipe", "input_text", "keyboard_enter",
	"navigate_home", "navigate_back", "open_app", "wait", "status", "answer",
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
	at, _ := obj["action_type"].(string)
	if !slices.Contains(androidActionTypes, at) {
		return Action{}, badField("action.action_type", "want one of %s, got %s", strings.Join(androidActionTypes, ", "), clip(Canonical(obj["action_type"]), 60))
	}
	a := Action{Text: Canonical(obj)}
	if at == "status" {
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
