package datapipe

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentworld/agentworld/internal/trajectory"
)

// TestSchemaMatchesGoTypes keeps the JSON Schema document and the Go
// types in step: every JSON field of the types is a schema property and
// the other way round.
func TestSchemaMatchesGoTypes(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(TrajectorySchema(), &schema); err != nil {
		t.Fatal(err)
	}
	props := func(m map[string]any) []string {
		var out []string
		for k := range m["properties"].(map[string]any) {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	tags := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := 0; i < rt.NumField(); i++ {
			if name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
				out = append(out, name)
			}
		}
		sort.Strings(out)
		return out
	}
	p := schema["properties"].(map[string]any)
	checks := []struct {
		name   string
		schema map[string]any
		goType any
	}{
		{"trajectory", schema, trajectory.Trajectory{}},
		{"components", p["components"].(map[string]any), trajectory.Components{}},
		{"turn", p["turns"].(map[string]any)["items"].(map[string]any), trajectory.Turn{}},
		{"demonstration", p["components"].(map[string]any)["properties"].(map[string]any)["demonstrations"].(map[string]any)["items"].(map[string]any), trajectory.Demonstration{}},
	}
	for _, c := range checks {
		if d := cmp.Diff(tags(c.goType), props(c.schema)); d != "" {
			t.Errorf("%s: Go fields vs schema properties (-go +schema):\n%s", c.name, d)
		}
	}
}

// TestSchemaAgreesWithChecks validates lines with the JSON Schema document
// itself: the lines Check accepts pass it and each bad trajectory fails it.
func TestSchemaAgreesWithChecks(t *testing.T) {
	var s jsonschema.Schema
	if err := json.Unmarshal(TrajectorySchema(), &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(line []byte) error {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			return err
		}
		return rs.Validate(v)
	}
	good, _ := os.ReadFile("testdata/small.jsonl")
	for i, l := range bytes.Split(bytes.TrimSpace(good), []byte("\n")) {
		if err := check(l); err != nil {
			t.Errorf("small.jsonl:%d: schema rejects a valid line: %v", i+1, err)
		}
	}
	bad, _ := os.ReadFile("testdata/bad.jsonl")
	for i, l := range bytes.Split(bytes.TrimSpace(bad), []byte("\n")) {
		n := i + 1
		if n == 1 || n == 7 || n == 4 || n == 8 || n == 6 {
			continue // valid trajectories, or byte-level problems (UTF-8, size, truncation)
		}
		if err := check(l); err == nil {
			t.Errorf("bad.jsonl:%d: schema accepts an invalid trajectory", n)
		}
	}
}
