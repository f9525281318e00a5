package conversation

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/fielderr"
)

// wantField checks that err is a field error on field that unwraps to
// ErrBadAction.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	fe, ok := fielderr.As(err)
	if !ok || fe.Path != field || !errors.Is(err, ErrBadAction) {
		t.Fatalf("got %v, want a field error on %s", err, field)
	}
}

func TestParseAction(t *testing.T) {
	cases := []struct {
		name  string
		d     domain.Domain
		raw   string
		text  string
		end   bool
		field string // non-empty: want a field error naming it
	}{
		{"terminal array", domain.Terminal, `[{"keystrokes":"ls\n","duration":1}]`, `[{"duration":1,"keystrokes":"ls\n"}]`, false, ""},
		{"terminal as string", domain.Terminal, `"[{\"keystrokes\": \"ls\\n\"}]"`, `[{"keystrokes":"ls\n"}]`, false, ""},
		{"terminal keeps number literal", domain.Terminal, `[{"keystrokes":"x","duration":0.10}]`, `[{"duration":0.10,"keystrokes":"x"}]`, false, ""},
		{"terminal no html escaping", domain.Terminal, `[{"keystrokes":"a && b > c\n"}]`, `[{"keystrokes":"a && b > c\n"}]`, false, ""},
		{"terminal end", domain.Terminal, `[]`, `[]`, true, ""},
		{"terminal null duration", domain.Terminal, `[{"keystrokes":"ls","duration":null}]`, `[{"duration":null,"keystrokes":"ls"}]`, false, ""},
		{"terminal key case", domain.Terminal, `[{"Keystrokes":"ls"}]`, `[{"Keystrokes":"ls"}]`, false, ""},
		{"terminal plain text", domain.Terminal, `"ls"`, "", false, "action"},
		{"terminal object", domain.Terminal, `{"keystrokes":"ls"}`, "", false, "action"},
		{"terminal bad element", domain.Terminal, `["ls"]`, "", false, "action[0]"},
		{"terminal negative duration", domain.Terminal, `[{"keystrokes":"ls","duration":-1}]`, "", false, "action[0].duration"},
		{"terminal trailing data", domain.Terminal, `"[] []"`, "", false, "action"},
		{"mcp call", domain.MCP, `{"name":"create_issue","arguments":{"title":"x","body":"y"}}`, `{"arguments":{"body":"y","title":"x"},"name":"create_issue"}`, false, ""},
		{"mcp openai shape", domain.MCP, `{"function":{"name":"f","arguments":"{\"a\":1}"}}`, `{"arguments":{"a":1},"name":"f"}`, false, ""},
		{"mcp tool_name alias", domain.MCP, `{"tool_name":"f","args":{"a":1}}`, `{"arguments":{"a":1},"name":"f"}`, false, ""},
		{"mcp empty string arguments", domain.MCP, `{"name":"f","arguments":""}`, `{"arguments":{},"name":"f"}`, false, ""},
		{"mcp function name falls back", domain.MCP, `{"name":"f","function":{"arguments":{"a":1}}}`, `{"arguments":{"a":1},"name":"f"}`, false, ""},
		{"mcp final answer", domain.MCP, `"All done."`, "All done.", true, ""},
		{"mcp no name", domain.MCP, `{"arguments":{}}`, "", false, "action.name"},
		{"mcp bad arguments", domain.MCP, `{"name":"f","arguments":[1]}`, "", false, "action.arguments"},
		{"search list of calls", domain.Search, `[{"name":"search","arguments":{"q":"go"}}]`, `[{"arguments":{"q":"go"},"name":"search"}]`, false, ""},
		{"search list bad call", domain.Search, `[{"name":"search"},{"q":"go"}]`, "", false, "action[1].name"},
		{"swe broken json", domain.SWE, `"{\"name\": "`, "", false, "action"},
		{"web click", domain.Web, `"click(\"12\")"`, `click("12")`, false, ""},
		{"web answer", domain.Web, `"send_msg_to_user(\"42\")"`, `send_msg_to_user("42")`, true, ""},
		{"web prose", domain.Web, `"I will click the button"`, "", false, "action"},
		{"web json", domain.Web, `{"click":1}`, "", false, "action"},
		{"android json", domain.Android, `{"action_type":"click","index":3}`, `{"action_type":"click","index":3}`, false, ""},
		{"android status", domain.Android, `{"action_type":"status","goal_status":"complete"}`, `{"action_type":"status","goal_status":"complete"}`, true, ""},
		{"android text", domain.Android, `"tap Settings"`, "tap Settings", false, ""},
		{"android not an action", domain.Android, `{"foo":1}`, "", false, "action.action_type"},
		{"android unknown type", domain.Android, `{"action_type":"teleport"}`, "", false, "action.action_type"},
		{"android type not a string", domain.Android, `{"action_type":3}`, "", false, "action.action_type"},
		{"web unknown command", domain.Web, `"foo(1)"`, "", false, "action"},
		{"web tab command", domain.Web, `"tab_focus(1)"`, "tab_focus(1)", false, ""},
		{"os code", domain.OS, `"pyautogui.click(10, 20)"`, "pyautogui.click(10, 20)", false, ""},
		{"os done", domain.OS, `"DONE"`, "DONE", true, ""},
		{"empty", domain.OS, `"  "`, "", false, "action"},
		{"missing", domain.OS, ``, "", false, "action"},
		{"unknown domain", domain.Domain("fax"), `"x"`, "", false, "domain"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := ParseAction(c.d, json.RawMessage(c.raw))
			if c.field != "" {
				wantField(t, err, c.field)
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

func TestParseActionParts(t *testing.T) {
	a, err := ParseAction(domain.Terminal, json.RawMessage(`[{"keystrokes":"ls\n","duration":0.5},{"keystrokes":"C-c"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Keystroke{{"ls\n", 0.5}, {"C-c", 0}}, a.Keystrokes); diff != "" {
		t.Errorf("keystrokes (-want +got):\n%s", diff)
	}
	a, err = ParseAction(domain.MCP, json.RawMessage(`{"type":"function","function":{"name":"f","arguments":"{\"q\": \"<x>\"}"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&ToolCall{Name: "f", Arguments: json.RawMessage(`{"q":"<x>"}`)}, a.Tool); diff != "" {
		t.Errorf("tool (-want +got):\n%s", diff)
	}
}

func TestParseKeystrokes(t *testing.T) {
	tests := []struct {
		in    string
		want  []Keystroke
		field string
	}{
		{in: `[]`, want: []Keystroke{}},
		{in: ` [{"keystrokes":"ls\n","duration":0.5}] `, want: []Keystroke{{"ls\n", 0.5}}},
		{in: `[{"keystrokes":"C-c"}]`, want: []Keystroke{{"C-c", 1}}},
		{in: `[{"keystrokes":"C-c","duration":null}]`, want: []Keystroke{{"C-c", 1}}},
		{in: `[{"keystrokes":"x","duration":0}]`, want: []Keystroke{{"x", 0}}},
		{in: `[{"keystrokes":"x","duration":1,"is_blocking":true}]`, want: []Keystroke{{"x", 1}}},
		{in: `[{"KEYSTROKES":"x","Duration":2}]`, want: []Keystroke{{"x", 2}}},
		{in: `ls -la`, field: "action"},
		{in: ``, field: "action"},
		{in: `{"keystrokes":"ls"}`, field: "action"},
		{in: `[{"duration":1}]`, field: "action[0].keystrokes"},
		{in: `[{"keystrokes":"a"},{"keystrokes":"b","duration":-1}]`, field: "action[1].duration"},
		{in: `[{"keystrokes":"a","duration":"1"}]`, field: "action[0].duration"},
		{in: `[{"keystrokes":"a","duration":1e999}]`, field: "action[0].duration"},
		{in: `["ls"]`, field: "action[0]"},
		{in: `[{"keystrokes":"a"`, field: "action"},
	}
	for _, tt := range tests {
		got, err := ParseKeystrokes(tt.in, 1)
		if tt.field != "" {
			t.Run(tt.in, func(t *testing.T) { wantField(t, err, tt.field) })
			continue
		}
		if err != nil {
			t.Errorf("ParseKeystrokes(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseKeystrokes(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestRenderKeystrokes(t *testing.T) {
	if got, want := RenderKeystrokes([]Keystroke{{"a && b\n", 1}}), `[{"keystrokes":"a && b\n","duration":1}]`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got := RenderKeystrokes(nil); got != "[]" {
		t.Errorf("no keystrokes render as %s, want []", got)
	}
}

func TestParseToolCall(t *testing.T) {
	tests := []struct {
		in    string
		want  ToolCall
		field string
	}{
		{in: `{"name":"read_graph"}`, want: ToolCall{Name: "read_graph"}},
		{in: `{"name":"a","arguments":{"x":1}}`, want: ToolCall{Name: "a", Arguments: json.RawMessage(`{"x":1}`)}},
		{in: `{"name":"a","arguments":{ "y": 2.50, "x": "<>" }}`, want: ToolCall{Name: "a", Arguments: json.RawMessage(`{"x":"<>","y":2.50}`)}},
		{in: `{"name":"a","arguments":null}`, want: ToolCall{Name: "a"}},
		{in: `{"name":"a","arguments":{}}`, want: ToolCall{Name: "a", Arguments: json.RawMessage(`{}`)}},
		{in: `{"tool":"a","args":{"x":1}}`, want: ToolCall{Name: "a", Arguments: json.RawMessage(`{"x":1}`)}},
		{in: `{"Name":"a"}`, want: ToolCall{Name: "a"}},
		{in: `{"type":"function","function":{"name":"f","arguments":"{\"q\":\"x\"}"}}`, want: ToolCall{Name: "f", Arguments: json.RawMessage(`{"q":"x"}`)}},
		{in: `{"type":"function","function":{"name":"f","arguments":""}}`, want: ToolCall{Name: "f"}},
		{in: `{"arguments":{}}`, field: "action.name"},
		{in: `{"name":"a","arguments":[1]}`, field: "action.arguments"},
		{in: `{"name":"a","arguments":"[1]"}`, field: "action.arguments"},
		{in: `{"name":"a","arguments":"{"}`, field: "action.arguments"},
		{in: `read_graph`, field: "action"},
		{in: `[{"name":"a"}]`, field: "action"},
		{in: `{"name":`, field: "action"},
	}
	for _, tt := range tests {
		got, err := ParseToolCall(tt.in)
		if tt.field != "" {
			t.Run(tt.in, func(t *testing.T) { wantField(t, err, tt.field) })
			continue
		}
		if err != nil {
			t.Errorf("ParseToolCall(%s): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseToolCall(%s) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestRenderToolCall(t *testing.T) {
	got, err := RenderToolCall("search", json.RawMessage(`{"q":"a<b","limit":10,"a":{"z":1,"y":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"arguments":{"a":{"y":2,"z":1},"limit":10,"q":"a<b"},"name":"search"}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got, _ := RenderToolCall("x", nil); got != `{"arguments":{},"name":"x"}` {
		t.Errorf("empty args: %s", got)
	}
	if _, err := RenderToolCall("x", json.RawMessage(`{`)); err == nil {
		t.Error("broken arguments rendered")
	}
}

func TestParseToolCallLine(t *testing.T) {
	tests := []struct {
		in    string
		want  ToolCall
		field string
	}{
		{"read_graph", ToolCall{Name: "read_graph"}, ""},
		{` echo {"message":"hi"} `, ToolCall{Name: "echo", Arguments: json.RawMessage(`{"message":"hi"}`)}, ""},
		{"", ToolCall{}, "call"},
		{"echo [1]", ToolCall{}, "call"},
		{"echo {", ToolCall{}, "call"},
	}
	for _, tc := range tests {
		got, err := ParseToolCallLine(tc.in)
		if tc.field != "" {
			t.Run(tc.in, func(t *testing.T) { wantField(t, err, tc.field) })
			continue
		}
		if err != nil || !cmp.Equal(got, tc.want) {
			t.Errorf("ParseToolCallLine(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// mustJSON encodes s as a JSON string, the form a client sends action
// text in.
func mustJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// FuzzParseAction: any raw action parses or fails with a field error, and
// the canonical text is a fixed point: parsing it again gives itself.
func FuzzParseAction(f *testing.F) {
	for _, s := range []string{`[{"keystrokes":"ls\n"}]`, `"[]"`, `{"name":"x","arguments":{}}`, `"click(\"1\")"`, `"DONE"`, `[1,2`, `"{\"a\":"`, `{"tool_name":"t","args":""}`} {
		f.Add(s, 0)
	}
	f.Fuzz(func(t *testing.T, raw string, di int) {
		d := domain.All[(di%len(domain.All)+len(domain.All))%len(domain.All)]
		a, err := ParseAction(d, json.RawMessage(raw))
		if err != nil {
			if _, ok := fielderr.As(err); !ok || !errors.Is(err, ErrBadAction) {
				t.Fatalf("error of the wrong kind: %v", err)
			}
			return
		}
		again, err := ParseAction(d, mustJSON(a.Text))
		if err != nil || again.Text != a.Text {
			t.Fatalf("canonical text %q reparsed to %q (%v)", a.Text, again.Text, err)
		}
	})
}

// FuzzKeystrokesRoundTrip: rendered keystrokes parse back to themselves,
// and whatever ParseKeystrokes accepts renders and parses back equal.
func FuzzKeystrokesRoundTrip(f *testing.F) {
	for _, s := range []string{`[]`, `[{"keystrokes":"ls\n","duration":0.5}]`, `[{"keystrokes":"C-c"}]`, `[{"duration":-1}]`, `x`, `[1]`} {
		f.Add(s, "ls\n", 1.5)
	}
	f.Fuzz(func(t *testing.T, s, keys string, dur float64) {
		if dur >= 0 && !math.IsInf(dur, 0) && !math.IsNaN(dur) {
			ks := []Keystroke{{Keystrokes: keys, Duration: dur}}
			got, err := ParseKeystrokes(RenderKeystrokes(ks), 7)
			if err != nil {
				t.Fatalf("rendered %+v does not parse: %v", ks, err)
			}
			// Text passes through JSON, which turns invalid UTF-8 into U+FFFD.
			want := []Keystroke{{Keystrokes: jsonString(keys), Duration: dur}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("round trip (-want +got):\n%s", diff)
			}
		}
		ks, err := ParseKeystrokes(s, 1)
		if err != nil {
			if !errors.Is(err, ErrBadAction) {
				t.Fatalf("error %v does not wrap ErrBadAction", err)
			}
			return
		}
		again, err := ParseKeystrokes(RenderKeystrokes(ks), 1)
		if err != nil || !cmp.Equal(ks, again) {
			t.Fatalf("%q: parsed %+v, rendered and parsed %+v (%v)", s, ks, again, err)
		}
	})
}

// jsonString is s after a trip through a JSON string.
func jsonString(s string) string {
	var out string
	_ = json.Unmarshal(mustJSON(s), &out)
	return out
}

// FuzzToolCallRoundTrip: a call ParseToolCall accepts renders to the text
// ParseAction gives it, and that text parses back to the same call.
func FuzzToolCallRoundTrip(f *testing.F) {
	for _, s := range []string{`{"name":"a"}`, `{"name":"a","arguments":{"x":[1]}}`, `{"function":{"name":"f","arguments":"{}"}}`, `[]`, `{"name":1}`, `{"tool":"t","args":"{\"k\":\"<v>\"}"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseToolCall(s)
		if err != nil {
			if !errors.Is(err, ErrBadAction) {
				t.Fatalf("error %v does not wrap ErrBadAction", err)
			}
			return
		}
		if c.Name == "" {
			t.Fatal("accepted an action without a name")
		}
		if len(c.Arguments) > 0 && (c.Arguments[0] != '{' || !json.Valid(c.Arguments)) {
			t.Fatalf("arguments %s are not a JSON object", c.Arguments)
		}
		text, err := RenderToolCall(c.Name, c.Arguments)
		if err != nil {
			t.Fatalf("parsed call %+v does not render: %v", c, err)
		}
		if !utf8.ValidString(s) {
			// ParseAction folds a run of invalid bytes into one U+FFFD,
			// JSON decoding makes one per byte.
			return
		}
		a, err := ParseAction(domain.MCP, json.RawMessage(s))
		if err != nil || a.Text != text {
			t.Fatalf("ParseAction text %q, RenderToolCall %q (%v)", a.Text, text, err)
		}
		again, err := ParseToolCall(text)
		if err != nil || again.Name != c.Name || (len(c.Arguments) > 0 && string(again.Arguments) != string(c.Arguments)) {
			t.Fatalf("rendered %q parsed to %+v, want %+v (%v)", text, again, c, err)
		}
	})
}

// FuzzParseToolCallLine: any --call text parses or fails cleanly, and a
// parsed call renders as a canonical action.
func FuzzParseToolCallLine(f *testing.F) {
	f.Add(`echo {"message":"hi"}`)
	f.Add(`read_graph`)
	f.Add(`x {"a":[1,{"b":null}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseToolCallLine(s)
		if err != nil {
			if !errors.Is(err, ErrBadAction) {
				t.Fatalf("error %v does not wrap ErrBadAction", err)
			}
			return
		}
		if _, err := RenderToolCall(c.Name, c.Arguments); err != nil {
			t.Fatalf("parsed call %+v does not render: %v", c, err)
		}
	})
}

// FuzzScanTerminal: ParseAction, which tries the one-pass scanner first,
// reads every Terminal action, as a JSON value or a JSON string, exactly as
// decoding into generic values alone does.
func FuzzScanTerminal(f *testing.F) {
	for _, s := range []string{
		`[{"keystrokes":"ls\n"}]`, `[]`, ` [ ] `, `[{"keystrokes":"cd /tmp\n","duration":0.5},{"duration":1e2,"keystrokes":"C-c"}]`,
		`[{"keystrokes":"a\b\f\t\r\"\\ é"}]`, `[{"keystrokes":"\/"}]`, `[{"keystrokes":"\u0041"}]`, `[{"keystrokes":"x","duration":-1}]`,
		`[{"keystrokes":"x","keystrokes":"y"}]`, `[{"Keystrokes":"x"}]`, `[{"keystrokes":"x","duration":null}]`, `[{"keystrokes":"\u2028"}]`,
		`[{"keystrokes":"x"},]`, `[{"keystrokes":"x"}] x`, `[{"keystrokes":"x","duration":01}]`, `[{"duration":-0,"keystrokes":""}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		// raw as the action's JSON value, and as a JSON string holding it.
		quoted, _ := json.Marshal(raw)
		for _, raw := range []string{raw, string(quoted)} {
			got, gotErr := ParseAction(domain.Terminal, json.RawMessage(raw))
			want, wantErr := parseAction(domain.Terminal, json.RawMessage(raw))
			if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
				t.Fatalf("ParseAction(%q) error %v, parseAction's %v", raw, gotErr, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("ParseAction(%q) (-parseAction +with the scanner):\n%s", raw, diff)
			}
		}
	})
}

// TestScanTerminalTakes: the scanner takes the actions agents send (so the
// fuzz comparison above compares something) and leaves the rest.
func TestScanTerminalTakes(t *testing.T) {
	for raw, want := range map[string]bool{
		`[{"keystrokes":"ls\n"}]`: true, ` [ ] `: true, `[{"keystrokes": "cd /tmp\n", "duration": 0.5}, {"duration":1e2,"keystrokes":"C-c"}]`: true,
		`[{"keystrokes":"a\b\f\t\r\"\\ é"}]`: true, `[{"duration":-0,"keystrokes":""}]`: true,
		`[{"keystrokes":"\/"}]`: false, `[{"keystrokes":"\u0041"}]`: false, `[{"keystrokes":"x","duration":-1}]`: false,
		`[{"keystrokes":"x","keystrokes":"y"}]`: false, `[{"Keystrokes":"x"}]`: false, `[{"keystrokes":"x","duration":null}]`: false,
		`[{"keystrokes":"x"},]`: false, `[{"keystrokes":"x"}] x`: false, `[{"duration":1}]`: false, `{"keystrokes":"x"}`: false,
	} {
		if _, ok := scanTerminal(raw); ok != want {
			t.Errorf("scanTerminal(%s) ok = %v, want %v", raw, ok, want)
		}
		quoted, _ := json.Marshal(raw)
		if v, end, ok := scanPlainString(string(quoted), 0); !ok || end != len(quoted) || v != raw {
			t.Errorf("scanPlainString(%s) = %q, %d, %v", quoted, v, end, ok)
		}
	}
}

// TestScanTerminalAllocations: the usual Terminal action, parsed on every
// step, costs four allocations: its text, its canonical text, the
// keystrokes with an escape decoded (in one buffer) and the list.
func TestScanTerminalAllocations(t *testing.T) {
	raw := json.RawMessage(`[{"keystrokes":"echo 1\n","duration":0.1}]`)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := ParseAction(domain.Terminal, raw); err != nil {
			t.Fatal(err)
		}
	}); n > 4 {
		t.Errorf("%v allocations to parse %s, want 4", n, raw)
	}
}
