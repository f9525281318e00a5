package mcpworld

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// doubling is a schema that applies its own definition twice under a
// property of itself: validation work doubles at every level of the
// instance (122 bytes of arguments took 7 s, 200 bytes would take hours).
const doubling = `{"$defs":{"n":{"type":"object","properties":{"a":{"allOf":[{"$ref":"#/$defs/n"},{"$ref":"#/$defs/n"}]}}}},"$ref":"#/$defs/n"}`

// chain applies each of 40 definitions twice to the same instance: 2^40
// applications for a flat `{}`, with no recursion at all.
func chain(n int) string {
	var b strings.Builder
	b.WriteString(`{"$defs":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == n-1 {
			b.WriteString(`"d` + strconv.Itoa(i) + `":{"type":"object"}`)
			continue
		}
		b.WriteString(`"d` + strconv.Itoa(i) + `":{"allOf":[{"$ref":"#/$defs/d` + strconv.Itoa(i+1) + `"},{"$ref":"#/$defs/d` + strconv.Itoa(i+1) + `"}]}`)
	}
	b.WriteString(`},"$ref":"#/$defs/d0"}`)
	return b.String()
}

func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "{}" + strings.Repeat("}", depth)
}

// TestSchemaValidationWorkIsBounded is a CPU attack on serve through an
// inline spec's input schema and a tool call's arguments, found this
// session: schemas that apply a definition twice, under recursion or along
// a chain, make the validator's work exponential in the arguments' depth
// or the schema's length; a pattern is matched against every string it
// applies to. Such calls are refused before the validator runs (counted
// work, not time), ordinary schemas and arguments still validate, and
// schemas whose work the model cannot bound are not compiled (the call is
// then only checked to be an object).
func TestSchemaValidationWorkIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name, schema, args string
		refused            bool // by the work bound
		invalid            bool // by the schema
	}{
		{"doubling, shallow", doubling, nested(4), false, false},
		{"doubling, 30 levels (2^30 applications)", doubling, nested(30), true, false},
		{"a chain of 40 doublings", chain(40), `{}`, true, false},
		{"a chain of 4 doublings", chain(4), `{}`, false, false},
		{"a large pattern over a long string", `{"type":"object","properties":{"q":{"type":"string","pattern":".{0,1000}x"}}}`, `{"q":"` + strings.Repeat("a", 1<<20) + `"}`, true, false},
		{"a large pattern over a short string", `{"type":"object","properties":{"q":{"type":"string","pattern":".{0,1000}x"}}}`, `{"q":"` + strings.Repeat("a", 100) + `"}`, false, true},
		{"ordinary", `{"type":"object","properties":{"key":{"type":"string","pattern":"^[A-Z]+-[0-9]+$"},"n":{"type":"integer"}},"required":["key"]}`, `{"key":"LL-13","n":2}`, false, false},
		{"ordinary, invalid", `{"type":"object","properties":{"key":{"type":"string","pattern":"^[A-Z]+-[0-9]+$"}},"required":["key"]}`, `{"key":"nope"}`, false, true},
		{"recursive tree, 1,000 nodes", `{"$defs":{"node":{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`, tree(10, 100), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := NewValidator(json.RawMessage(tc.schema))
			if v.resolved == nil {
				t.Fatal("the schema did not compile")
			}
			issue := v.Check(json.RawMessage(tc.args))
			switch {
			case tc.refused && !strings.Contains(issue, "units of work"):
				t.Fatalf("not refused by the work bound: %q", issue)
			case !tc.refused && strings.Contains(issue, "units of work"):
				t.Fatalf("refused: %q", issue)
			case !tc.refused && tc.invalid != (issue != ""):
				t.Fatalf("issue %q, want invalid=%v", issue, tc.invalid)
			}
		})
	}
	// What the model cannot bound is not compiled: in-place cycles (the
	// validator would not end), references it cannot resolve as the
	// validator does, dynamic references.
	for _, schema := range []string{
		`{"allOf":[{"$ref":"#"}]}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`{"properties":{"x":{"$id":"http://example.com/x","$ref":"#/y"}}}`,
		`{"$dynamicRef":"#meta"}`,
		`{"$defs":{"a":{},"A":{}},"$ref":"#/$defs/a"}`,
	} {
		if cs := compileSchema(json.RawMessage(schema)); cs != nil {
			t.Errorf("%s compiled", schema)
		}
	}
}

// tree is a JSON tree of breadth^depth-ish nodes: a node with breadth
// children, each a leaf, repeated depth times along one spine.
func tree(depth, breadth int) string {
	leaf := `{}`
	var b strings.Builder
	b.WriteString(`{"children":[`)
	for i := range breadth {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(leaf)
	}
	b.WriteString(`]}`)
	s := b.String()
	for range depth {
		s = `{"children":[` + s + `,` + strings.Repeat(leaf+",", breadth-1) + leaf + `]}`
	}
	return s
}

// TestDeepSchemasDoNotCompile: the validator's resolver works in the
// square of a schema's depth (9,000 nested "not"s, 72 KB: 167 s and 181 MiB
// on a loaded machine), so a schema nested past world.MaxSchemaDepth is
// not compiled, whatever skipped spec validation; one within it is.
func TestDeepSchemasDoNotCompile(t *testing.T) {
	deep := func(n int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`{"not":`, n) + `{}` + strings.Repeat(`}`, n))
	}
	if compileSchema(deep(9000)) != nil {
		t.Fatal("a schema nested 9,000 deep compiled")
	}
	if compileSchema(deep(60)) == nil {
		t.Fatal("a schema nested 60 deep did not compile")
	}
}
