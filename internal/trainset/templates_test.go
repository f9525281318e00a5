package trainset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// versionLibrary is a library with v1 and v2, each adding one instruction
// to the os and terminal templates of its parent.
func versionLibrary(t *testing.T) (*promptlib.Library, map[string]*promptlib.Version) {
	t.Helper()
	lib, err := promptlib.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vs := map[string]*promptlib.Version{}
	vs["v0"], _ = lib.Get("v0")
	parent := vs["v0"]
	for _, name := range []string{"v1", "v2"} {
		v := parent
		for _, d := range []domain.Domain{domain.OS, domain.Terminal} {
			src := strings.Replace(v.Templates[string(d)], "# How to answer\n", "# How to answer\nRule of "+name+".\n", 1)
			if v, err = v.With(d, src, "", "test"); err != nil {
				t.Fatal(err)
			}
		}
		v.Parent = parent.ID
		added, err := lib.Add(v)
		if err != nil {
			t.Fatal(err)
		}
		vs[name], parent = added, added
	}
	return lib, vs
}

// sectioned is a system prompt in the published rows' layout.
func sectioned(i int) string {
	return fmt.Sprintf("You stand in for shell %d.\n\n## Task\nClean up /tmp.\n\n## Action space\nkeystrokes %d\n\n## How to simulate\n- Be exact.", i, i)
}

// mixedTrajectories writes n trajectories, even ones with components and
// odd ones with only a sectioned prompt of their own.
func mixedTrajectories(t *testing.T, n int) (string, []*trajectory.Trajectory) {
	t.Helper()
	var b bytes.Buffer
	var out []*trajectory.Trajectory
	for i := range n {
		tr := &trajectory.Trajectory{ID: fmt.Sprintf("t%03d", i), Domain: "terminal",
			Turns: []trajectory.Turn{{Action: "ls", Observation: fmt.Sprintf("file%d", i)}, {Action: "pwd", Observation: "/tmp"}}}
		if i%2 == 0 {
			tr.Domain = "os"
			tr.Components = &trajectory.Components{TaskDescription: fmt.Sprintf("Task %d.", i), ActionSpace: "pyautogui", InitialState: "A desktop."}
		} else {
			tr.SystemPrompt = sectioned(i)
		}
		line, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
		out = append(out, tr)
	}
	path := filepath.Join(t.TempDir(), "trajs.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, out
}

// wantSystem is what v renders for tr: its components, or its own prompt
// split back into them.
func wantSystem(t *testing.T, lib *promptlib.Library, v *promptlib.Version, tr *trajectory.Trajectory) string {
	t.Helper()
	d := domain.Domain(tr.Domain)
	if tr.Components != nil {
		s, err := v.Render(d, *tr.Components)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	p, _, err := lib.Decompose(d, tr.SystemPrompt)
	if err != nil {
		t.Fatal(err)
	}
	s, err := v.RenderParts(d, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTemplateMixDrawsPerTrajectory(t *testing.T) {
	lib, vs := versionLibrary(t)
	m, err := promptlib.ParseMixes([]byte("sft:\n  - {version: v1, weight: 1}\n  - {version: v2, weight: 3}\n"), "m.yaml", lib)
	if err != nil {
		t.Fatal(err)
	}
	e, err := expand.NewExpander(&expand.ExpandOptions{Templates: m.SFT, Library: lib, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, trajs := mixedTrajectories(t, 400)
	counts := map[string]int{}
	for _, tr := range trajs {
		var names []string
		err := e.Expand(tr, func(s *expand.Sample) error {
			v := vs[s.Template]
			if v == nil || s.TemplateID != v.ID {
				t.Fatalf("%s: pinned %q %q", s.ID, s.Template, s.TemplateID)
			}
			if want := wantSystem(t, lib, v, tr); s.System != want {
				t.Fatalf("%s under %s:\n%s", s.ID, s.Template, cmp.Diff(want, s.System))
			}
			names = append(names, s.Template)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 2 || names[0] != names[1] {
			t.Fatalf("%s: the turns of one trajectory drew %v", tr.ID, names)
		}
		counts[names[0]]++
	}
	if counts["v1"] < 70 || counts["v1"] > 130 || counts["v1"]+counts["v2"] != 400 {
		t.Errorf("draws %v, want about 1:3", counts)
	}
}

// TestExportsPinTemplateVersions: SFT samples, per-trajectory lines, RL
// rows and CPT documents pin the version they drew, from their stage's mix
// only, and the export metadata counts them.
func TestExportsPinTemplateVersions(t *testing.T) {
	lib, vs := versionLibrary(t)
	m, err := promptlib.ParseMixes([]byte("cpt:\n  - {version: v0, weight: 1}\nsft:\n  - {version: v1, weight: 1}\n  - {version: v2, weight: 1}\n"), "m.yaml", lib)
	if err != nil {
		t.Fatal(err)
	}
	path, _ := mixedTrajectories(t, 40)
	ctx := context.Background()
	for _, f := range []Format{FormatSamples, FormatSwift, FormatLlamaFactory, FormatTRL} {
		var out bytes.Buffer
		xo := &expand.ExpandOptions{Templates: m.SFT, Library: lib, Seed: 1}
		sum, err := Export(ctx, []string{path}, &out, xo, &ExportOptions{Format: f}, &datapipe.Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
		seen := map[string]int64{}
		for _, l := range lines {
			var pin struct {
				Template   string `json:"template"`
				TemplateID string `json:"template_id"`
			}
			if err := json.Unmarshal(l, &pin); err != nil {
				t.Fatal(err)
			}
			if v := vs[pin.Template]; v == nil || v.ID != pin.TemplateID || pin.Template == "v0" {
				t.Fatalf("format %v: line pins %q %q, not an sft version", f, pin.Template, pin.TemplateID)
			}
			seen[TemplatePin(pin.Template, pin.TemplateID)]++
		}
		if diff := cmp.Diff(seen, sum.Templates); diff != "" {
			t.Errorf("format %v: summary counts (-lines +summary):\n%s", f, diff)
		}
		meta := NewExportMeta(fmt.Sprint(f), xo, sum)
		if len(meta.Versions) != 2 || meta.Versions[0].Name != "v1" || meta.Versions[1].Name != "v2" ||
			meta.Versions[0].Lines+meta.Versions[1].Lines != int64(len(lines)) || meta.OwnPrompt != 0 {
			t.Errorf("format %v: metadata %+v for %d lines", f, meta, len(lines))
		}
	}
	cm, _, err := ExportCPT(ctx, []string{path}, t.TempDir(), &expand.ExpandOptions{Templates: m.CPT, Library: lib}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int64{TemplatePin("v0", vs["v0"].ID): 40}, cm.Templates); diff != "" {
		t.Errorf("cpt manifest pins (-want +got):\n%s", diff)
	}
}

// TestDefaultVersionPinsComponents: without a mix, components are rendered
// by the default version (v0 unless given) and pinned; an own prompt is
// kept byte for byte and pins nothing.
func TestDefaultVersionPinsComponents(t *testing.T) {
	lib, vs := versionLibrary(t)
	path, trajs := mixedTrajectories(t, 4)
	for _, def := range []*promptlib.Version{nil, vs["v2"]} {
		var out bytes.Buffer
		xo := &expand.ExpandOptions{Default: def}
		sum, err := Export(context.Background(), []string{path}, &out, xo, &ExportOptions{Format: FormatSamples}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := vs["v0"]
		if def != nil {
			want = def
		}
		byID := map[string]*trajectory.Trajectory{}
		for _, x := range trajs {
			byID[x.ID] = x
		}
		for _, s := range testkit.DecodeLines[expand.Sample](t, out.Bytes()) {
			tr := byID[s.TrajectoryID]
			if tr.Components != nil {
				if s.Template != want.Name || s.TemplateID != want.ID || s.System != wantSystem(t, lib, want, tr) {
					t.Fatalf("%s: pinned %q, system %q", s.ID, s.Template, s.System)
				}
			} else if s.Template != "" || s.System != tr.SystemPrompt {
				t.Fatalf("%s: own prompt changed or pinned %q", s.ID, s.Template)
			}
		}
		meta := NewExportMeta("samples", xo, sum)
		if len(meta.Versions) != 1 || meta.Versions[0].ID != want.ID || meta.Versions[0].Lines != 4 || meta.OwnPrompt != 4 {
			t.Fatalf("metadata %+v", meta)
		}
	}
}

// TestUndecomposablePromptNamesTheLine: a version selected for a
// trajectory whose own prompt cannot be split stops the export with the
// file and line.
func TestUndecomposablePromptNamesTheLine(t *testing.T) {
	var out bytes.Buffer
	_, err := Export(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, &out,
		&expand.ExpandOptions{Templates: promptlib.Single(promptlib.Builtin())}, &ExportOptions{Format: FormatSamples}, nil)
	if !errors.Is(err, promptlib.ErrNotDecomposable) || !strings.Contains(err.Error(), "../datapipe/testdata/small.jsonl:1: trajectory android-0000000: system_prompt: template version v0:") {
		t.Fatalf("got %v", err)
	}
	_, _, err = ExportCPT(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, t.TempDir(),
		&expand.ExpandOptions{Templates: promptlib.Single(promptlib.Builtin())}, nil, nil)
	if !errors.Is(err, promptlib.ErrNotDecomposable) || !strings.Contains(err.Error(), "../datapipe/testdata/small.jsonl:1:") {
		t.Fatalf("cpt: got %v", err)
	}
	if _, err := expand.NewExpander(&expand.ExpandOptions{Templates: []promptlib.MixEntry{{Version: "v3", Weight: 1}}}); err == nil {
		t.Fatal("an unresolved mix entry was accepted")
	}
}
