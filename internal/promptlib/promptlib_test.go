package promptlib

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
)

var comps = trajectory.Components{
	TaskDescription: "List the files.",
	ActionSpace:     "Shell commands.",
	InitialState:    "An empty home directory.",
	Demonstrations:  []trajectory.Demonstration{{Action: "pwd", Observation: "/home/u"}},
}

func TestBuiltinRendersLikeTheSimulator(t *testing.T) {
	v0 := Builtin()
	for _, d := range domain.All {
		want, err := trajectory.WorldSystemPrompt(d, comps)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v0.Render(d, comps)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: v0 renders differently from the built-in prompt:\n%s", d, cmp.Diff(want, got))
		}
	}
	if v0.ID != ContentID(v0.Templates) || len(v0.ID) != 64 {
		t.Errorf("v0 id %q", v0.ID)
	}
}

// edit appends an instruction to the "How to answer" part of d's template.
func edit(t *testing.T, v *Version, d domain.Domain, line string) *Version {
	t.Helper()
	src := strings.Replace(v.Templates[string(d)], "# How to answer\n", "# How to answer\n"+line+"\n", 1)
	c, err := v.With(d, src, "", "add: "+line)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLibraryRoundTripAndPromote(t *testing.T) {
	dir := t.TempDir()
	lib, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	v0, _ := lib.Get("v0")
	v1, err := lib.Add(edit(t, v0, domain.OS, "Keep file listings sorted."))
	if err != nil {
		t.Fatal(err)
	}
	if v1.Name != "v1" || v1.Parent != v0.ID {
		t.Fatalf("added %s parent %s", v1.Name, v1.Parent)
	}
	again, err := lib.Add(edit(t, v0, domain.OS, "Keep file listings sorted."))
	if err != nil || again != v1 {
		t.Fatalf("re-adding the same content: %v, %v", again, err)
	}
	v2, err := lib.Add(edit(t, v1, domain.OS, "Print errors the way bash does."))
	if err != nil || v2.Name != "v2" {
		t.Fatalf("v2: %v %v", v2, err)
	}

	re, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range re.List() {
		names = append(names, v.Name)
	}
	if diff := cmp.Diff([]string{"v0", "v1", "v2"}, names); diff != "" {
		t.Fatal(diff)
	}
	got, err := re.Get(v2.ID[:8])
	if err != nil || got.Templates["os"] != v2.Templates["os"] || got.Rationale != v2.Rationale || got.Parent != v1.ID {
		t.Fatalf("v2 read back: %+v %v", got, err)
	}
	p, _ := re.Promoted()
	if p.Name != "v0" {
		t.Fatalf("promoted before promote: %s", p.Name)
	}
	if _, err := re.Promote("v2"); err != nil {
		t.Fatal(err)
	}
	re2, _ := Open(dir)
	if p, err := re2.Get(""); err != nil || p.ID != v2.ID {
		t.Fatalf("promoted after promote: %v %v", p, err)
	}
	out, err := got.Render(domain.OS, comps)
	if err != nil || !strings.Contains(out, "Print errors the way bash does.\nKeep file listings sorted.") {
		t.Fatalf("render under v2: %v\n%s", err, out)
	}
	d := Diff(v1, v2)
	if !strings.Contains(d, "+Print errors the way bash does.\n") || strings.Contains(d, "-Keep") || !strings.HasPrefix(d, "--- v1 os\n+++ v2 os\n") {
		t.Fatalf("diff:\n%s", d)
	}
	if Diff(v2, v2) != "" {
		t.Fatal("a version differs from itself")
	}
}

func TestBadVersionsNameTheField(t *testing.T) {
	lib, _ := Open(t.TempDir())
	v0, _ := lib.Get("v0")
	tests := []struct {
		name, file, want string
	}{
		{"unknown domain", `{"name":"v9","templates":{"chess":"{{define \"prompt\"}}x{{end}}"}}`, "templates.chess: not a domain name"},
		{"no prompt block", `{"name":"v9","templates":{"os":"hello"}}`, `templates.os: template os defines no "prompt" block`},
		{"bad template", `{"name":"v9","templates":{"os":"{{define \"prompt\"}}{{.X"}}`, "templates.os:"},
		{"hand edited", `{"id":"` + v0.ID + `","name":"v9","templates":{"os":"{{define \"prompt\"}}x{{end}}"}}`, "id: " + v0.ID + " does not match"},
		{"unknown field", `{"name":"v9","colour":"red","templates":{}}`, "unknown field"},
		{"no name", `{"templates":{"os":"{{define \"prompt\"}}x{{end}}"}}`, "name: empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseVersion([]byte(tc.file), "v9.json")
			if !errors.Is(err, ErrBadVersion) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "v9.json: ") {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := lib.Get("v7"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(v7): %v", err)
	}
}

func TestMixes(t *testing.T) {
	dir := t.TempDir()
	lib, _ := Open(dir)
	v0, _ := lib.Get("v0")
	v1, err := lib.Add(edit(t, v0, domain.OS, "Be terse."))
	if err != nil {
		t.Fatal(err)
	}
	good := "cpt:\n  - {version: v0, weight: 1}\n  - {version: v1, weight: 2}\nsft:\n  - version: " + v1.ID[:10] + "\n    weight: 1\n"
	m, err := ParseMixes([]byte(good), "mixes.yaml", lib)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.CPT) != 2 || m.CPT[1].Resolved != v1 || m.SFT[0].Resolved != v1 || len(m.RL) != 0 {
		t.Fatalf("%+v", m)
	}
	tests := []struct{ name, file, want string }{
		{"zero weight", "sft:\n  - {version: v0, weight: 0}\n", "mixes.yaml:2: bad template mixes: sft[0].weight: must be a finite number > 0"},
		{"unknown version", "rl:\n  - {version: v0, weight: 1}\n  - {version: v8, weight: 1}\n", "mixes.yaml:3: bad template mixes: rl[1].version: template version not found"},
		{"missing version", "cpt:\n  - {weight: 1}\n", "mixes.yaml:2: bad template mixes: cpt[0].version: empty"},
		{"twice", "cpt:\n  - {version: v1, weight: 1}\n  - version: " + v1.ID[:8] + "\n    weight: 1\n", "mixes.yaml:3: bad template mixes: cpt[1].version: " + v1.ID[:8] + " is already cpt[0]"},
		{"weight line", "sft:\n  - version: v0\n\n    weight: -2\n", "mixes.yaml:4: bad template mixes: sft[0].weight"},
		{"unknown stage", "dpo:\n  - {version: v0, weight: 1}\n", "dpo"},
		{"empty", "", "no stage declares a version"},
		{"not a list", "sft: v0\n", "want a mapping of stages (cpt, sft, rl) to lists of {version, weight}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMixes([]byte(tc.file), "mixes.yaml", lib)
			if !errors.Is(err, ErrBadMixes) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	p := filepath.Join(dir, "m.yaml")
	os.WriteFile(p, []byte(good), 0o644)
	if _, err := LoadMixes(p, lib); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseMixes(f *testing.F) {
	f.Add([]byte("cpt:\n  - {version: v0, weight: 1}\n"))
	f.Add([]byte("sft: [{version: v0, weight: -1}]\nrl: x\n"))
	lib, _ := Open("")
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMixes(b, "f.yaml", lib)
		if err == nil {
			for _, s := range Stages {
				es, _ := m.Stage(s)
				for _, e := range es {
					if e.Resolved == nil || !(e.Weight > 0) {
						t.Fatalf("accepted %+v", e)
					}
				}
			}
		}
	})
}

func FuzzParseVersion(f *testing.F) {
	f.Add([]byte(`{"name":"v1","templates":{"os":"{{define \"prompt\"}}{{.TaskDescription}}{{end}}"}}`))
	f.Add([]byte(`{"name":"v1","templates":{"os":"{{define \"prompt\"}}{{template \"prompt\"}}{{end}}"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseVersion(b, "f.json")
		if err != nil {
			return
		}
		if v.ID != ContentID(v.Templates) {
			t.Fatal("id does not match content")
		}
		for _, d := range v.Domains() {
			_, _ = v.Render(domain.Domain(d), comps) // must not panic
		}
	})
}

// TestVersionMembers: versionShaped knows every member a version file
// has, so no version is ever taken for other JSON.
func TestVersionMembers(t *testing.T) {
	v := &Version{ID: "i", Name: "n", Parent: "p", Rationale: "r", Templates: map[string]string{"os": "t"}}
	b, err := v.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var members map[string]any
	if err := json.Unmarshal(b, &members); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range members {
		got = append(got, k)
	}
	sort.Strings(got)
	if diff := cmp.Diff(versionMembers, got); diff != "" {
		t.Errorf("versionMembers differ from a version file's members (-list +file):\n%s", diff)
	}
}

// FuzzVersionFile: a file the library would load as a version is never
// skipped as other JSON, and a bad one is reported as ErrBadVersion.
func FuzzVersionFile(f *testing.F) {
	b, _ := Builtin().Marshal()
	f.Add(b)
	f.Add([]byte(`{"format":"samples","versions":[{"name":"v1","id":"ab","lines":3}],"own_prompt_lines":0,"summary":null}`))
	f.Add([]byte(`{"name":"v2","template":{}}`))
	f.Add([]byte("null"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ParseVersion(b, "f.json")
		if err == nil && !versionShaped(b) {
			t.Fatalf("a valid version taken for other JSON: %q", b)
		}
		if err != nil && !errors.Is(err, ErrBadVersion) {
			t.Fatalf("error without ErrBadVersion: %v", err)
		}
	})
}
