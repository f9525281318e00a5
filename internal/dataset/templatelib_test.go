package dataset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const libraryYAML = `templates:
  - name: v0
    text: "You simulate {{.Domain}}."
  - name: v1
    parent: v0
    text: "You simulate {{.Domain}}. {{.SystemPrompt}}"
  - name: v3
    parent: v1
    text: "{{.SystemPrompt}}"
  - name: copy-of-v0
    text: "You simulate {{.Domain}}."
mixes:
  cpt: {v0: 1, v1: 1}
  sft: {v1: 1, v3: 3}
  rl: {v3: 1}
`

func TestTemplateLibrary(t *testing.T) {
	ts, err := ParseTemplates([]byte(libraryYAML), "lib.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for i := range ts.Templates {
		tm := &ts.Templates[i]
		h := sha256.Sum256([]byte(tm.Text))
		if want := hex.EncodeToString(h[:])[:12]; tm.ID() != want {
			t.Fatalf("%s: id %s, want %s", tm.Name, tm.ID(), want)
		}
		ids[tm.Name] = tm.ID()
	}
	if ids["v0"] != ids["copy-of-v0"] || ids["v0"] == ids["v1"] {
		t.Fatalf("ids %v: equal texts must share an id, different ones not", ids)
	}
	if _, err := NewExpander(&ExpandOptions{Templates: ts}); err == nil {
		t.Fatal("a library without weights used without a stage")
	}
	for stage, want := range map[string][]string{"cpt": {"v0", "v1"}, "sft": {"v1", "v3"}, "rl": {"v3"}} {
		st, err := ts.ForStage(stage)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tm := range st.Templates {
			got = append(got, tm.Name)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("stage %s (-want +got):\n%s", stage, d)
		}
	}
	if _, err := ts.ForStage("dpo"); err == nil || !strings.Contains(err.Error(), "dpo") {
		t.Fatalf("unknown stage: %v", err)
	}
	plain, _ := ParseTemplates([]byte("templates:\n  - {name: a, weight: 1, text: x}\n"), "p.yaml")
	if st, err := plain.ForStage("sft"); err != nil || st != plain {
		t.Fatalf("a file without mixes must serve every stage by its weights: %v", err)
	}
}

func TestTemplateLibraryErrors(t *testing.T) {
	cases := map[string]string{
		"templates:\n  - {name: a, parent: b, weight: 1, text: x}\n":                                               "parent \"b\"",
		"templates:\n  - {name: a, parent: b, weight: 1, text: x}\n  - {name: b, parent: a, weight: 1, text: y}\n": "cycle",
		"templates:\n  - {name: a, text: x}\nmixes:\n  sft: {b: 1}\n":                                              "mixes.sft.b",
		"templates:\n  - {name: a, text: x}\nmixes:\n  sft: {a: 0}\n":                                              "mixes.sft.a",
		"templates:\n  - {name: a, text: x}\n":                                                                     "weight must be > 0",
	}
	for in, want := range cases {
		if _, err := ParseTemplates([]byte(in), "lib.yaml"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one mentioning %q", in, err, want)
		}
	}
}

// TestExportsPinTemplates: SFT samples, per-trajectory lines and CPT
// documents record the name and content hash of the version they drew,
// from their stage's mix only.
func TestExportsPinTemplates(t *testing.T) {
	ts, err := ParseTemplates([]byte(libraryYAML), "lib.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for i := range ts.Templates {
		ids[ts.Templates[i].Name] = ts.Templates[i].ID()
	}
	sft, _ := ts.ForStage("sft")
	var out bytes.Buffer
	if _, err := Export(context.Background(), []string{"testdata/small.jsonl"}, &out, &ExpandOptions{Templates: sft, Seed: 3}, nil, nil); err != nil {
		t.Fatal(err)
	}
	drawn := map[string]int{}
	for _, s := range samplesOf(t, out.Bytes()) {
		if ids[s.Template] != s.TemplateID {
			t.Fatalf("%s: template %s pinned %s, library says %s", s.ID, s.Template, s.TemplateID, ids[s.Template])
		}
		drawn[s.Template]++
	}
	if len(drawn) != 2 || drawn["v1"] == 0 || drawn["v3"] <= drawn["v1"] {
		t.Fatalf("sft draws %v, want v1 and v3 at about 1:3", drawn)
	}
	out.Reset()
	if _, err := Export(context.Background(), []string{"testdata/small.jsonl"}, &out, &ExpandOptions{Templates: sft}, &ExportOptions{Format: FormatSwift}, nil); err != nil {
		t.Fatal(err)
	}
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var sl SwiftLine
		json.Unmarshal(l, &sl)
		if sl.Template == "" || ids[sl.Template] != sl.TemplateID {
			t.Fatalf("swift line %s: template %q id %q", sl.ID, sl.Template, sl.TemplateID)
		}
	}
	cpt, _ := ts.ForStage("cpt")
	m, _, err := ExportCPT(context.Background(), []string{"testdata/small.jsonl"}, t.TempDir(), &ExpandOptions{Templates: cpt}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for pin := range m.Templates {
		name, id, _ := strings.Cut(pin, "@")
		if (name != "v0" && name != "v1") || ids[name] != id {
			t.Fatalf("cpt manifest pins %q, not a cpt version of the library", pin)
		}
	}
}
