package conversation

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/domain"
)

func TestHumanAction(t *testing.T) {
	tests := []struct {
		d    domain.Domain
		line string
		raw  string // what HumanAction sends
		text string // the canonical text ParseAction makes of it
	}{
		{domain.Terminal, "ls -la", `[{"keystrokes":"ls -la\n","duration":1}]`, `[{"duration":1,"keystrokes":"ls -la\n"}]`},
		{domain.Terminal, "echo a && b > c", `[{"keystrokes":"echo a && b > c\n","duration":1}]`, `[{"duration":1,"keystrokes":"echo a && b > c\n"}]`},
		{domain.Terminal, " ^C ", `[{"keystrokes":"C-c","duration":0.5}]`, `[{"duration":0.5,"keystrokes":"C-c"}]`},
		{domain.Terminal, "", `[]`, `[]`},
		{domain.Terminal, ` [{"keystrokes":"pwd\n"}]`, `[{"keystrokes":"pwd\n"}]`, `[{"keystrokes":"pwd\n"}]`},
		{domain.MCP, `search {"q": "go"}`, `{"arguments":{"q":"go"},"name":"search"}`, `{"arguments":{"q":"go"},"name":"search"}`},
		{domain.MCP, "read_graph", `{"arguments":{},"name":"read_graph"}`, `{"arguments":{},"name":"read_graph"}`},
		{domain.Search, `{"name":"s","arguments":{}}`, `{"name":"s","arguments":{}}`, `{"arguments":{},"name":"s"}`},
		{domain.SWE, "the bug is fixed", `"the bug is fixed"`, "the bug is fixed"},
		{domain.SWE, `edit {broken`, `"edit {broken"`, "edit {broken"},
		{domain.SWE, `edit null`, `"edit null"`, "edit null"},
		{domain.Android, `{"action_type":"status"}`, `{"action_type":"status"}`, `{"action_type":"status"}`},
		{domain.Web, `click("12")`, `"click(\"12\")"`, `click("12")`},
	}
	for _, tt := range tests {
		raw := HumanAction(tt.d, tt.line)
		if string(raw) != tt.raw {
			t.Errorf("HumanAction(%s, %q) = %s, want %s", tt.d, tt.line, raw, tt.raw)
			continue
		}
		a, err := ParseAction(tt.d, raw)
		if err != nil || a.Text != tt.text {
			t.Errorf("ParseAction(%s, %s) = %q, %v; want %q", tt.d, raw, a.Text, err, tt.text)
		}
	}
}

// FuzzHumanAction: whatever a person types becomes a raw action that
// ParseAction takes or rejects with a field error, and a Terminal line
// that does not look like JSON always becomes a valid action.
func FuzzHumanAction(f *testing.F) {
	for _, s := range []string{"ls", "^D", "", "tool {\"a\":1}", "[1", "answer text"} {
		f.Add(s, 0)
	}
	f.Fuzz(func(t *testing.T, line string, di int) {
		d := domain.All[(di%len(domain.All)+len(domain.All))%len(domain.All)]
		_, err := ParseAction(d, HumanAction(d, line))
		if err != nil && !errors.Is(err, ErrBadAction) {
			t.Fatalf("error of the wrong kind: %v", err)
		}
		if d == domain.Terminal && err != nil && !strings.HasPrefix(strings.TrimSpace(line), "[") {
			t.Fatalf("terminal line %q gave no action: %v", line, err)
		}
	})
}
