package promptlib

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// componentSets are the shapes the built-in templates render differently:
// optional sections present or left out, the default rules or an own
// instruction, and a component that holds a heading of the template itself.
var componentSets = map[string]trajectory.Components{
	"all": {
		TaskDescription: "Rename report.txt.", ActionSpace: "Python with pyautogui.", InitialState: "A desktop.",
		Demonstrations:        []trajectory.Demonstration{{Action: "pwd", Observation: "/home/u"}, {Action: "ls", Observation: "a b"}},
		SimulationInstruction: "Answer with the tree.",
	},
	"minimal":          {TaskDescription: "List files.", ActionSpace: "Shell commands."},
	"default rules":    {TaskDescription: "List files.", ActionSpace: "Shell.", InitialState: "Empty home."},
	"demos only":       {TaskDescription: "t", ActionSpace: "a", Demonstrations: []trajectory.Demonstration{{Action: "x", Observation: "y"}}},
	"no task":          {ActionSpace: "Shell commands.", InitialState: "s"},
	"heading inside":   {TaskDescription: "Task.\n\n# How to simulate\nnot really", ActionSpace: "a\n\n# What the agent can do\nmore", InitialState: "# State before the first action\nx"},
	"multiline spaces": {TaskDescription: "  padded  ", ActionSpace: "line 1\n\nline 2\n", SimulationInstruction: "  rule  "},
}

// normalized is what a version renders c from, as text parts: trimmed, the
// default rules as "".
func normalized(t *testing.T, v *Version, d domain.Domain, c trajectory.Components) Parts {
	t.Helper()
	p := Parts{
		TaskDescription: strings.TrimSpace(c.TaskDescription), ActionSpace: strings.TrimSpace(c.ActionSpace),
		InitialState: strings.TrimSpace(c.InitialState), Demonstrations: trajectory.RenderDemonstrations(c.Demonstrations),
		SimulationInstruction: strings.TrimSpace(c.SimulationInstruction),
	}
	if p.SimulationInstruction == domain.TemplateRules(v.parsed[d]) {
		p.SimulationInstruction = ""
	}
	return p
}

func TestDecomposeRoundTripsEveryDomain(t *testing.T) {
	dir := t.TempDir()
	lib, _ := Open(dir)
	v0, _ := lib.Get("v0")
	v1, err := lib.Add(edit(t, v0, domain.OS, "Keep the tree's column order."))
	if err != nil {
		t.Fatal(err)
	}
	rr := NewRerenderer(lib, v1)
	for _, d := range domain.All {
		for name, c := range componentSets {
			t.Run(string(d)+"/"+name, func(t *testing.T) {
				sys, err := v0.Render(d, c)
				if err != nil {
					t.Fatal(err)
				}
				p, from, err := lib.Decompose(d, sys)
				if err != nil {
					t.Fatal(err)
				}
				if from != "v0" {
					t.Errorf("recognised as %s, want v0", from)
				}
				// A component holding the template's own headings can be
				// split more than one way; any split that renders back is
				// right, so only the re-rendering below is compared.
				if diff := cmp.Diff(normalized(t, v0, d, c), p); diff != "" && name != "heading inside" {
					t.Errorf("parts (-want +got):\n%s", diff)
				}
				got, err := rr.Rerender(d, sys)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := v1.Render(d, c)
				if got != want {
					t.Errorf("re-rendered under v1 (-want +got):\n%s", cmp.Diff(want, got))
				}
				// A prompt v1 rendered comes back to itself.
				if again, err := rr.Rerender(d, want); err != nil || again != want {
					t.Errorf("v1 prompt re-rendered under v1 changed: %v\n%s", err, cmp.Diff(want, again))
				}
			})
		}
	}
}

// TestDecomposeDefaultRulesFollowTheVersion: a prompt rendered with the
// default rules gets the target version's rules, not the old ones.
func TestDecomposeDefaultRulesFollowTheVersion(t *testing.T) {
	lib, _ := Open(t.TempDir())
	v0, _ := lib.Get("v0")
	src := strings.Replace(v0.Templates["os"], "{{define \"rules\"}}", "{{define \"rules\"}}- Never invent windows.\n", 1)
	v1, err := lib.Add(mustWith(t, v0, domain.OS, src))
	if err != nil {
		t.Fatal(err)
	}
	c := componentSets["default rules"]
	sys, _ := v0.Render(domain.OS, c)
	got, err := NewRerenderer(lib, v1).Rerender(domain.OS, sys)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "- Never invent windows.\n") {
		t.Fatalf("v1's rules missing:\n%s", got)
	}
}

func mustWith(t *testing.T, v *Version, d domain.Domain, src string) *Version {
	t.Helper()
	c, err := v.With(d, src, "", "test")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDecomposeBundledRows reads the system prompts of the bundled
// AgentWorldBench rows (examples/bench, the published sectioned layout)
// and checks each section lands in its component.
func TestDecomposeBundledRows(t *testing.T) {
	lib, _ := Open("")
	files, _ := filepath.Glob("../../examples/bench/*_test.jsonl")
	if len(files) == 0 {
		t.Fatal("no bundled rows")
	}
	n := 0
	rr := NewRerenderer(lib, Builtin())
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for line := 1; sc.Scan(); line++ {
			var row struct {
				Task   string `json:"task"`
				System string `json:"system_str"`
			}
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			d := domain.FromTask(row.Task)
			p, from, err := lib.Decompose(d, row.System)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			pre, _, _ := strings.Cut(row.System, "\n\n## Task\n")
			_, task, _ := strings.Cut(row.System, "## Task\n")
			task, _, _ = strings.Cut(task, "\n\n## ")
			_, act, _ := strings.Cut(row.System, "## Action space\n")
			act, _, _ = strings.Cut(act, "\n\n## ")
			_, sim, _ := strings.Cut(row.System, "## How to simulate\n")
			want := Parts{TaskDescription: pre + "\n\n" + task, ActionSpace: act, SimulationInstruction: strings.TrimSpace(sim)}
			_, init, _ := strings.Cut(row.System, "## Initial state\n")
			init, _, _ = strings.Cut(init, "\n\n## ")
			want.InitialState = strings.TrimSpace(init) // the renderer trims components
			if from != SectionsLayout {
				t.Errorf("%s:%d: read as %s", path, line, from)
			}
			if diff := cmp.Diff(want, p); diff != "" {
				t.Errorf("%s:%d: parts (-want +got):\n%s", path, line, diff)
			}
			out, err := rr.Rerender(d, row.System)
			if err != nil || !strings.Contains(out, "# What the agent can do\n"+act+"\n") {
				t.Errorf("%s:%d: re-rendered under v0: %v\n%s", path, line, err, out)
			}
			n++
		}
		f.Close()
	}
	if n < 20 {
		t.Fatalf("read %d rows", n)
	}
}

func TestDecomposeErrors(t *testing.T) {
	lib, _ := Open("")
	tests := []struct{ name, system, want string }{
		{"empty", "  \n", "it is empty"},
		{"free text", "You are a terminal. Reply with output.", "no action space section"},
		{"unknown section", "Intro.\n\n## Task\nt\n\n## Action space\na\n\n## Scoring\nx", `section "## Scoring" is not a component`},
		{"twice", "## Action space\na\n\n## Tools\nb", "appears twice"},
		{"example outside demonstrations", "## Action space\na\n\n## Example 1\nx", `"## Example 1" is not a component`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := lib.Decompose(domain.Terminal, tc.system)
			if !errors.Is(err, ErrNotDecomposable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	p, _, err := lib.Decompose(domain.Terminal, "## Action space\na\n\n## Demonstrations\n## Example 1\nx\n\n## Example 2\ny\n\n## How to simulate:\nz")
	if err != nil || p.Demonstrations != "## Example 1\nx\n\n## Example 2\ny" || p.SimulationInstruction != "z" {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestRerendererConcurrent(t *testing.T) {
	lib, _ := Open("")
	v0, _ := lib.Get("v0")
	rr := NewRerenderer(lib, v0)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for k := range 50 {
				c := trajectory.Components{TaskDescription: strings.Repeat("t", i+k+1), ActionSpace: "a"}
				sys, _ := v0.Render(domain.Web, c)
				if got, err := rr.Rerender(domain.Web, sys); err != nil || got != sys {
					t.Errorf("%v", err)
				}
			}
		})
	}
	wg.Wait()
}

func FuzzDecompose(f *testing.F) {
	v0 := Builtin()
	for _, c := range componentSets {
		s, _ := v0.Render(domain.OS, c)
		f.Add(s)
	}
	f.Add("Intro\n\n## Task\nt\n\n## Action space\na\n\n## How to simulate\nrules")
	lib, _ := Open("")
	dc := decomposer{versions: lib.versions} // keeps its skeletons between inputs
	f.Fuzz(func(t *testing.T, s string) {
		p, from, err := dc.decompose(domain.OS, s)
		if err != nil {
			return
		}
		if from == "v0" {
			if again, err := v0.RenderParts(domain.OS, p); err != nil || again != s {
				t.Fatalf("split does not render back: %v", err)
			}
		}
		if _, err := v0.RenderParts(domain.OS, p); err != nil {
			t.Fatal(err)
		}
	})
}
