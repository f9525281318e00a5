package server

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/sim"
)

func TestOpenEnvAction(t *testing.T) {
	cases := []struct {
		in, want, field string
	}{
		{`{"action": "[]"}`, `"[]"`, ""},
		{`{"action": [{"keystrokes": "ls\n"}]}`, `[{"keystrokes": "ls\n"}]`, ""},
		{`{"type": "call_tool", "tool_name": "search", "arguments": {"q": "go"}}`, `{"arguments":{"q":"go"},"name":"search"}`, ""},
		{`{"type": "call_tool", "tool_name": "list"}`, `{"arguments":{},"name":"list"}`, ""},
		{`{"name": "f", "arguments": {}}`, `{"name": "f", "arguments": {}}`, ""},
		{`"click('1')"`, `"click('1')"`, ""},
		{`{"type": "call_tool"}`, ``, "action.tool_name"},
		{``, ``, "action"},
		{`null`, ``, "action"},
	}
	for _, c := range cases {
		got, err := openEnvAction(json.RawMessage(c.in))
		if c.field != "" {
			e, ok := err.(*Error)
			if !ok || e.Field != c.field {
				t.Errorf("%s: got %v, want an error on %s", c.in, err, c.field)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %s %v, want %s", c.in, got, err, c.want)
		}
	}
}

func TestOpenEnvResultShape(t *testing.T) {
	r := &sim.StepResult{Observation: "o", Reward: 0, Truncated: true, Info: sim.StepInfo{Turn: 3, Backend: "model"}}
	got, _ := json.Marshal(openEnvResult("s_1", r))
	var m map[string]any
	_ = json.Unmarshal(got, &m)
	want := map[string]any{
		"observation": map[string]any{"text": "o", "turn": 3.0, "session_id": "s_1", "truncated": true},
		"reward":      0.0,
		"done":        true,
		"metadata":    map[string]any{"turn": 3.0, "latency_ms": 0.0, "backend": "model"},
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Fatalf("OpenEnv step reply (-want +got):\n%s", diff)
	}
}

func FuzzOpenEnvAction(f *testing.F) {
	for _, s := range []string{`{"action":"x"}`, `{"type":"call_tool","tool_name":"a","arguments":{"b":1}}`, `{"type":1}`, `[`, `"s"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := openEnvAction(json.RawMessage(in))
		if err == nil && len(out) == 0 {
			t.Fatalf("no action and no error for %q", in)
		}
	})
}
