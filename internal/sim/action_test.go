package sim

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/domain"
)

func TestParseAction(t *testing.T) {
	cases := []struct {
		name  string
		d     domain.Domain
		raw   string
		text  string
		end   bool
		field string // non-empty: want a FieldError naming it
	}{
		{"terminal array", domain.Terminal, `[{"keystrokes":"ls\n","duration":1}]`, `[{"duration":1,"keystrokes":"ls\n"}]`, false, ""},
		{"terminal as string", domain.Terminal, `"[{\"keystrokes\": \"ls\\n\"}]"`, `[{"keystrokes":"ls\n"}]`, false, ""},
		{"terminal keeps number literal", domain.Terminal, `[{"keystrokes":"x","duration":0.10}]`, `[{"duration":0.10,"keystrokes":"x"}]`, false, ""},
		{"terminal no html escaping", domain.Terminal, `[{"keystrokes":"a && b > c\n"}]`, `[{"keystrokes":"a && b > c\n"}]`, false, ""},
		{"terminal end", domain.Terminal, `[]`, `[]`, true, ""},
		{"terminal plain text", domain.Terminal, `"ls"`, "", false, "action"},
		{"terminal object", domain.Terminal, `{"keystrokes":"ls"}`, "", false, "action"},
		{"terminal bad element", domain.Terminal, `["ls"]`, "", false, "action[0]"},
		{"terminal negative duration", domain.Terminal, `[{"keystrokes":"ls","duration":-1}]`, "", false, "action[0].duration"},
		{"terminal trailing data", domain.Terminal, `"[] []"`, "", false, "action"},
		{"mcp call", domain.MCP, `{"name":"create_issue","arguments":{"title":"x","body":"y"}}`, `{"arguments":{"body":"y","title":"x"},"name":"create_issue"}`, false, ""},
		{"mcp openai shape", domain.MCP, `{"function":{"name":"f","arguments":"{\"a\":1}"}}`, `{"arguments":{"a":1},"name":"f"}`, false, ""},
		{"mcp final answer", domain.MCP, `"All done."`, "All done.", true, ""},
		{"mcp no name", domain.MCP, `{"arguments":{}}`, "", false, "action.name"},
		{"mcp bad arguments", domain.MCP, `{"name":"f","arguments":[1]}`, "", false, "action.arguments"},
		{"search list of calls", domain.Search, `[{"name":"search","arguments":{"q":"go"}}]`, `[{"arguments":{"q":"go"},"name":"search"}]`, false, ""},
		{"swe broken json", domain.SWE, `"{\"name\": "`, "", false, "action"},
		{"web click", domain.Web, `"click(\"12\")"`, `click("12")`, false, ""},
		{"web answer", domain.Web, `"send_msg_to_user(\"42\")"`, `send_msg_to_user("42")`, true, ""},
		{"web prose", domain.Web, `"I will click the button"`, "", false, "action"},
		{"web json", domain.Web, `{"click":1}`, "", false, "action"},
		{"android json", domain.Android, `{"action_type":"click","index":3}`, `{"action_type":"click","index":3}`, false, ""},
		{"android status", domain.Android, `{"action_type":"status","goal_status":"complete"}`, `{"action_type":"status","goal_status":"complete"}`, true, ""},
		{"android text", domain.Android, `"tap Settings"`, "tap Settings", false, ""},
		{"os code", domain.OS, `"pyautogui.click(10, 20)"`, "pyautogui.click(10, 20)", false, ""},
		{"os done", domain.OS, `"DONE"`, "DONE", true, ""},
		{"empty", domain.OS, `"  "`, "", false, "action"},
		{"missing", domain.OS, ``, "", false, "action"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := ParseAction(c.d, json.RawMessage(c.raw))
			if c.field != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrBadRequest) {
					t.Fatalf("got %v, want a FieldError on %s", err, c.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.text, a.Text); diff != "" || a.End != c.end {
				t.Fatalf("text diff %s end=%v", diff, a.End)
			}
		})
	}
}

func FuzzParseAction(f *testing.F) {
	for _, s := range []string{`[{"keystrokes":"ls\n"}]`, `"[]"`, `{"name":"x","arguments":{}}`, `"click(\"1\")"`, `"DONE"`, `[1,2`, `"{\"a\":"`} {
		f.Add(s, 0)
	}
	f.Fuzz(func(t *testing.T, raw string, di int) {
		d := domain.All[(di%len(domain.All)+len(domain.All))%len(domain.All)]
		a, err := ParseAction(d, json.RawMessage(raw))
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error of the wrong kind: %v", err)
			}
			return
		}
		// Canonical text is a fixed point: parsing it again gives itself.
		again, err := ParseAction(d, mustJSON(a.Text))
		if err != nil || again.Text != a.Text {
			t.Fatalf("canonical text %q reparsed to %q (%v)", a.Text, again.Text, err)
		}
	})
}
