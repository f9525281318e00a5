package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/trajectory"
)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), got)
}

func TestStatsTableJSONPlot(t *testing.T) {
	testkit.NoLeaks(t)
	st, sum, err := CollectStats(context.Background(), []string{"testdata/small.jsonl"}, nil, &Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, d := range st.Domains {
		n += d.Trajectories
	}
	if n != sum.Records || st.All.Trajectories != n {
		t.Fatalf("trajectories %d vs %d", n, sum.Records)
	}
	var table bytes.Buffer
	if err := st.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	golden(t, "stats_small.txt", table.Bytes())
	js, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var back CorpusStats
	if err := json.Unmarshal(js, &back); err != nil || back.All.OL.N != st.All.OL.N {
		t.Fatalf("json round trip: %v", err)
	}
	for _, f := range []string{"png", "svg"} {
		var img bytes.Buffer
		if err := st.WritePlot(&img, f); err != nil {
			t.Fatal(err)
		}
		magic := map[string]string{"png": "\x89PNG", "svg": "<?xml"}[f]
		if !bytes.HasPrefix(img.Bytes(), []byte(magic)) || img.Len() < 5000 {
			t.Errorf("%s plot: %d bytes starting %q", f, img.Len(), img.Bytes()[:min(8, img.Len())])
		}
	}
}

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

// TestCPythonPeerAgrees runs the CPython peer of bench/ on the sample
// corpus and requires byte-identical output.
func TestCPythonPeerAgrees(t *testing.T) {
	py := testkit.LookPath(t, "python3", "install python3 (Debian: apt-get install python3)")
	cfg, _ := LoadMaskingConfig("")
	cfgJSON, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(t.TempDir(), "cfg.json")
	os.WriteFile(cfgPath, cfgJSON, 0o644)
	in, err := os.ReadFile("testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "../../perf/mask_peer.py", cfgPath)
	cmd.Stdin = bytes.NewReader(in)
	peer, err := cmd.Output()
	if err != nil {
		t.Fatalf("peer: %v", err)
	}
	var ours bytes.Buffer
	if _, err := Mask(context.Background(), []string{"testdata/small.jsonl"}, &ours, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if ours.Len() == 0 || !bytes.Equal(ours.Bytes(), peer) {
		t.Errorf("outputs differ:\n%s", cmp.Diff(string(peer), ours.String()))
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
