package sim

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
//   - mcp, search, swe: "tool {json args}" calls a tool; JSON is taken as is;
//     other text is a final answer;
//   - android, web, os: the line as it is.
func HumanAction(d domain.Domain, line string) json.RawMessage {
	t := strings.TrimSpace(line)
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	switch d {
	case domain.Terminal:
		switch {
		case t == "":
			return json.RawMessage(`[]`)
		case strings.HasPrefix(t, "["):
			return json.RawMessage(t)
		case t == "^C" || t == "^D" || t == "^Z":
			b, _ := json.Marshal([]map[string]any{{"keystrokes": "C-" + strings.ToLower(t[1:]), "duration": 0.5}})
			return b
		}
		b, _ := json.Marshal([]map[string]any{{"keystrokes": line + "\n", "duration": 1}})
		return b
	case domain.MCP, domain.Search, domain.SWE:
		if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			return json.RawMessage(t)
		}
		if name, args, ok := strings.Cut(t, " "); ok && strings.HasPrefix(strings.TrimSpace(args), "{") && json.Valid([]byte(args)) {
			b, _ := json.Marshal(map[string]json.RawMessage{"name": str(name), "arguments": json.RawMessage(strings.TrimSpace(args))})
			return b
		}
		if !strings.Contains(t, " ") && t != "" { // a bare tool name
			b, _ := json.Marshal(map[string]any{"name": t, "arguments": map[string]any{}})
			return b
		}
		return str(line)
	case domain.Android:
		if strings.HasPrefix(t, "{") {
			return json.RawMessage(t)
		}
	}
	return str(line)
}
