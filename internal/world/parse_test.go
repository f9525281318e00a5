package world

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/google/go-cmp/cmp"
)

// sameJSON compares raw JSON (tool schemas) by value: spacing may differ
// between a YAML file and its JSON form.
var sameJSON = cmp.Comparer(func(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && cmp.Equal(x, y)
})

// TestJSONAndYAMLReadTheSame parses each bundled world as its YAML file and
// as JSON (the way an inline spec arrives): the JSON road skips YAML and
// must not change what a spec means.
func TestJSONAndYAMLReadTheSame(t *testing.T) {
	worlds, err := LoadDir("../../examples/worlds")
	if err != nil {
		t.Fatal(err)
	}
	for name, fromYAML := range worlds {
		t.Run(name, func(t *testing.T) {
			js, err := json.Marshal(fromYAML)
			if err != nil {
				t.Fatal(err)
			}
			fromJSON, err := Parse(js, "inline")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(fromYAML, fromJSON, sameJSON); diff != "" {
				t.Errorf("JSON spec differs from its YAML file (-yaml +json):\n%s", diff)
			}
		})
	}
}

func TestParseJSONAndYAMLForms(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // "" parses; else a substring of the error
	}{
		{"JSON object", `{"domain":"os","task_description":"t","action_space":"click(x)"}`, ""},
		{"JSON with leading blank lines", "\n\n  {\"domain\":\"os\",\"task_description\":\"t\",\"action_space\":\"click(x)\"}", ""},
		{"YAML flow mapping (not JSON)", `{domain: os, task_description: t, action_space: "click(x)"}`, ""},
		{"YAML block", "domain: os\ntask_description: t\naction_space: click(x)\n", ""},
		{"JSON unknown field", `{"domain":"os","task_description":"t","action_space":"click(x)","colour":1}`, `unknown field "colour"`},
		{"JSON wrong type", `{"domain":"os","task_description":"t","action_space":"click(x)","max_turns":"3"}`, "max_turns"},
		{"JSON missing field", `{"domain":"os","action_space":"click(x)"}`, "field task_description: missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.in), "w.json")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s.Name != "w" || s.Domain != "os" || s.ActionSpace.Description != "click(x)" {
					t.Errorf("parsed %+v", s)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "w.json") {
				t.Fatalf("got %v, want an error naming w.json and containing %q", err, tc.want)
			}
		})
	}
}

// FuzzParse feeds specs in both forms: Parse never panics, and a spec it
// accepts reads back the same from its JSON form.
func FuzzParse(f *testing.F) {
	f.Add(perturbedSpec)
	f.Add(`{"domain":"mcp","task_description":"t","action_space":[{"name":"a","inputSchema":{"type":"object"}}]}`)
	f.Add(`{domain: os, task_description: t, action_space: "click(x)"}`)
	f.Add(`{"domain":"os","task_description":"t","action_space":"x"} {}`)
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse([]byte(in), "f.yaml")
		if err != nil {
			return
		}
		js, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(js, "f.json")
		if err != nil {
			t.Fatalf("accepted spec does not read back from its JSON %s: %v", js, err)
		}
		if diff := cmp.Diff(s, again, sameJSON); diff != "" {
			t.Fatalf("JSON form reads back differently (-first +again):\n%s", diff)
		}
	})
}

// largeSpec is an inline-spec-shaped JSON world of about size bytes: many
// tools with nested input schemas, the shape of a large imported MCP server.
func largeSpec(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"name":"big","domain":"mcp","task_description":"A large MCP server.","action_space":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"tool_%d","description":"Does thing %d to a record.","input_schema":{"type":"object","properties":{`, i, i)
		for j := range 12 {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"field_%d":{"type":"string","description":"the record's field %d","enum":["a","b","c"]}`, j, j)
		}
		b.WriteString(`},"required":["field_0"]}}`)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// peakHeap runs fn and returns the most heap in use while it ran, above
// what was in use before, sampled every millisecond.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // owned by peakHeap: stopped and waited for below
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base && m.HeapAlloc-base > peak.Load() {
				peak.Store(m.HeapAlloc - base)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	return peak.Load()
}

// BenchmarkParseLargeSpec parses one 4.5 MB JSON spec the way inline specs
// are parsed now (JSON decoded directly) and the way they were before (the
// same bytes through the YAML reader, still the road of YAML files), and
// reports each road's CPU time and peak heap and their ratios, measured in
// the same run:
//
//	go test ./internal/world -run '^$' -bench ParseLargeSpec -benchtime 1x
func BenchmarkParseLargeSpec(b *testing.B) {
	spec := largeSpec(4_500_000)
	viaYAML := func() {
		js, err := yaml.YAMLToJSON(spec)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := decode(js, "inline"); err != nil {
			b.Fatal(err)
		}
	}
	viaJSON := func() {
		if _, err := Parse(spec, "inline"); err != nil {
			b.Fatal(err)
		}
	}
	var jsonDur, yamlDur time.Duration
	var jsonPeak, yamlPeak uint64
	for b.Loop() {
		start := time.Now()
		jsonPeak = max(jsonPeak, peakHeap(viaJSON))
		jsonDur += time.Since(start)
		start = time.Now()
		yamlPeak = max(yamlPeak, peakHeap(viaYAML))
		yamlDur += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(len(spec))/1e6, "spec-MB")
	b.ReportMetric(jsonDur.Seconds()/n, "json-s/op")
	b.ReportMetric(yamlDur.Seconds()/n, "yaml-s/op")
	b.ReportMetric(yamlDur.Seconds()/jsonDur.Seconds(), "yaml/json-time")
	b.ReportMetric(float64(jsonPeak)/1e6, "json-peak-MB")
	b.ReportMetric(float64(yamlPeak)/1e6, "yaml-peak-MB")
	b.ReportMetric(float64(yamlPeak)/float64(jsonPeak), "yaml/json-peak")
}
