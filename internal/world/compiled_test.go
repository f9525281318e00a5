package world

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/regexlimit"
)

// TestCompiledBytesBoundsSpecs: what a spec makes the server compile is
// estimated and bounded; the specs of issue 21 (large patterns in a rule,
// a success rule or a schema; schemas of many nodes) are refused with the
// field at fault, and ordinary ones pass with a small estimate.
func TestCompiledBytesBoundsSpecs(t *testing.T) {
	tool := func(out string) string {
		return `{"name":"get","input_schema":{"type":"object","properties":{"q":{"type":"string","pattern":"^[a-z]+$"}}},"output_schema":` + out + `}`
	}
	spec := func(tools, extra string) string {
		return `{"domain":"mcp","task_description":"t","initial_state":"s","action_space":{"tools":[` + tools + `]}` + extra + `}`
	}
	wide := make([]string, 20_000)
	for i := range wide {
		wide[i] = fmt.Sprintf(`"p%d":{}`, i)
	}
	bigPattern, _ := json.Marshal(strings.Repeat(`\pL{1000}`, 400))
	for _, tc := range []struct {
		name, spec, field string
	}{
		{"ordinary", spec(tool(`{"type":"object","properties":{"n":{"type":"integer"}}}`), `,"perturbations":[{"when":{"action":"^get"},"inject":{"kind":"timeout"}}],"reward":{"success":{"final_observation":"done"}}`), ""},
		{"a large schema pattern", spec(tool(`{"type":"object","properties":{"n":{"type":"string","pattern":`+string(bigPattern)+`}}}`), ""), "action_space.tools[0].output_schema"},
		{"a large patternProperties key", spec(tool(`{"type":"object","patternProperties":{`+string(bigPattern)+`:{}}}`), ""), "action_space.tools[0].output_schema"},
		{"a property named pattern is no pattern", spec(tool(`{"type":"object","properties":{"pattern":{"type":"string"}}}`), ""), ""},
		{"a schema of 20,000 nodes", spec(tool(`{"type":"object","properties":{`+strings.Join(wide, ",")+`}}`), ""), "action_space.tools"},
		{"a large perturbation pattern", spec(tool(`{}`), `,"perturbations":[{"when":{"action":`+string(bigPattern)+`},"inject":{"kind":"timeout"}}]`), "perturbations.rules[0].when.action"},
		{"a schema nested 9,000 deep (167 s to resolve)", spec(tool(strings.Repeat(`{"not":`, 9000)+`{}`+strings.Repeat(`}`, 9000)), ""), "action_space.tools[0].output_schema"},
		{"a schema nested 20 deep", spec(tool(strings.Repeat(`{"not":`, 20)+`{}`+strings.Repeat(`}`, 20)), ""), ""},
		{"a large success pattern", spec(tool(`{}`), `,"reward":{"success":{"final_observation":`+string(bigPattern)+`}}`), "reward.success.final_observation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.spec), "w.json")
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				if n := s.CompiledBytes(); n <= 0 || n > 64<<10 {
					t.Fatalf("CompiledBytes %d", n)
				}
				return
			}
			fe, ok := fielderr.As(err)
			if !ok || fe.Path != tc.field {
				t.Fatalf("got %v, want an error at %s", err, tc.field)
			}
			if !strings.Contains(err.Error(), "limit") {
				t.Errorf("the error does not say which limit: %v", err)
			}
		})
	}
	// Patterns over the total of a perturbations section, each admitted.
	var rules []string
	for i := range 70 {
		rules = append(rules, fmt.Sprintf(`{"when":{"action":"[\\pL\\pN]{1000}|r%d"},"inject":{"kind":"timeout"}}`, i))
	}
	_, err := Parse([]byte(spec(tool(`{}`), `,"perturbations":[`+strings.Join(rules, ",")+`]`)), "w.json")
	if fe, ok := fielderr.As(err); !ok || !strings.HasSuffix(fe.Path, ".when.action") || !strings.Contains(err.Error(), "for all of them") {
		t.Fatalf("70 large patterns: %v", err)
	}
	if _, err := SchemaCost(json.RawMessage(`{"pattern":` + string(bigPattern) + `}`)); !errors.Is(err, regexlimit.ErrTooLarge) {
		t.Fatalf("SchemaCost: %v", err)
	}
}

// FuzzSchemaCost: any text is measured without a panic, never below the
// nodes it holds.
func FuzzSchemaCost(f *testing.F) {
	for _, s := range []string{`{}`, `{"pattern":"a+"}`, `{"patternProperties":{"^x":{"pattern":"y"}}}`, `[{"a":[{}]}]`, `{"a":`, `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := SchemaCost(json.RawMessage(s))
		if err == nil && json.Valid([]byte(s)) && n < strings.Count(s, "{")*SchemaNodeBytes && !strings.Contains(s, `"`) {
			t.Fatalf("%q: %d", s, n)
		}
	})
}
