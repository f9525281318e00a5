package conversation

import (
	"encoding/json"
	"strings"

	"github.com/agentworld/agentworld/internal/domain"
)

// HumanAction turns a line a person typed into an action for domain d, so
// `agentworld play` accepts natural input beside the exact JSON forms:
//   - terminal: a line that is not a JSON array is typed as keystrokes with
//     Enter and a one-second wait; ^C, ^D, ^Z send C-c, C-d, C-z; an empty
//     line sends [] (task finished);
//   - mcp, search, swe: "tool {json args}" ([ParseToolCallLine]) or a bare
//     tool name calls a tool; JSON is taken as is; other text is a final
//     answer;
//   - android, web, os: the line as it is.
//
// The result is a raw action for [ParseAction], which validates it.
func HumanAction(d domain.Domain, line string) json.RawMessage {
	t := strings.TrimSpace(line)
	switch d {
	case domain.Terminal:
		switch {
		case t == "":
			return json.RawMessage(`[]`)
		case strings.HasPrefix(t, "["):
			return json.RawMessage(t)
		case t == "^C" || t == "^D" || t == "^Z":
			return json.RawMessage(RenderKeystrokes([]Keystroke{{Keystrokes: "C-" + strings.ToLower(t[1:]), Duration: 0.5}}))
		}
		return json.RawMessage(RenderKeystrokes([]Keystroke{{Keystrokes: line + "\n", Duration: 1}}))
	case domain.MCP, domain.Search, domain.SWE:
		if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			return json.RawMessage(t)
		}
		_, args, _ := strings.Cut(t, " ")
		if args = strings.TrimSpace(args); t != "" && (args == "" || strings.HasPrefix(args, "{")) {
			if c, err := ParseToolCallLine(t); err == nil {
				if text, err := RenderToolCall(c.Name, c.Arguments); err == nil {
					return json.RawMessage(text)
				}
			}
		}
		return stringAction(line)
	case domain.Android:
		if strings.HasPrefix(t, "{") {
			return json.RawMessage(t)
		}
	}
	return stringAction(line)
}

// stringAction encodes s as a JSON string, the form an action's text takes
// on the wire.
func stringAction(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
