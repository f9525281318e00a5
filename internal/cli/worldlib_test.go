package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/world"
)

// smallLibrary stores n MCP worlds, each with an easy and a hard task.
func smallLibrary(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "lib")
	w, err := library.Create(dir, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range n {
		name := fmt.Sprintf("tracker-%d", i)
		we := &library.WorldEntry{
			Spec: &world.Spec{Name: name, Domain: "mcp", TaskDescription: "an issue tracker",
				ActionSpace: world.ActionSpace{Tools: []world.Tool{{Name: "close_issue"}}}},
			Tags:       []string{"tracker"},
			Provenance: library.Provenance{Source: "seed", Model: "gen-1", Seed: int64(i)},
		}
		var tasks []*library.TaskEntry
		for _, d := range []string{library.Easy, library.Hard} {
			tasks = append(tasks, &library.TaskEntry{ID: name + "-" + d, World: name, Instruction: "close WS-" + d, Difficulty: d,
				Check:     &world.SuccessRule{State: []world.StateFact{{Entity: "WS-9", Attribute: "status", Value: "closed"}}},
				Reference: []json.RawMessage{json.RawMessage(`{"name":"close_issue","arguments":{"key":"WS-9"}}`), json.RawMessage(`"done"`)}})
		}
		if err := w.Add(we, tasks); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestWorldListShowSample(t *testing.T) {
	lib := smallLibrary(t, 5)
	out, errOut, err := runCLI(t, "world", "list", lib, "--difficulty", "hard", "--kind", "tasks")
	if err != nil {
		t.Fatal(err, errOut)
	}
	if got := strings.Count(out, "\n"); got != 5 || !strings.Contains(errOut, "0 worlds, 5 tasks") {
		t.Errorf("list --difficulty hard: %d lines\n%s%s", got, out, errOut)
	}
	out, _, err = runCLI(t, "world", "list", lib, "--model", "gen-1", "--kind", "worlds", "--tags", "tracker")
	if err != nil || strings.Count(out, "world ") != 5 {
		t.Errorf("list worlds by model and tag: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, "world", "show", lib, "tracker-3")
	if err != nil || !strings.Contains(out, `"tracker-3-easy"`) || !strings.Contains(out, `"source": "seed"`) {
		t.Errorf("show world: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "world", "show", lib, "nope"); err == nil || !strings.Contains(err.Error(), "not in the library") {
		t.Errorf("show of a missing name: %v", err)
	}
	a, _, err := runCLI(t, "world", "sample", lib, "-n", "3", "--seed", "4")
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := runCLI(t, "world", "sample", lib, "-n", "3", "--seed", "4")
	if a != b || strings.Count(a, "\n") != 3 || !strings.Contains(a, `"world":"tracker-`) {
		t.Errorf("seeded samples differ or are malformed:\n%s\n%s", a, b)
	}
}

// TestServeLoadsLibrary: a library given as the worlds directory serves its
// worlds and a world per task carrying the task's check.
func TestServeLoadsLibrary(t *testing.T) {
	lib := smallLibrary(t, 2)
	a, err := app.New(t.Context(), app.Config{WorldsDir: lib})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(t.Context())
	for _, name := range []string{"tracker-0", "tracker-1-hard", "issue-tracker-mcp"} {
		if _, ok := a.Manager.World(name); !ok {
			t.Errorf("world %s not served", name)
		}
	}
	if s, _ := a.Manager.World("tracker-1-hard"); s != nil && (s.Reward == nil || len(s.Reward.Success.State) != 1) {
		t.Errorf("task world without its check: %+v", s.Reward)
	}
}

// TestWorldCheckAllReportsRate: `world check --all` over a library reads
// each fictional world's ledger and reports its contradiction rate.
func TestWorldCheckAllReportsRate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lib")
	w, err := library.Create(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"isle-a", "isle-b"} {
		spec := &world.Spec{Name: name, Domain: "search", TaskDescription: "an invented isle",
			ActionSpace: world.ActionSpace{Tools: []world.Tool{{Name: "search"}}},
			Facts: &fiction.Facts{Entities: []fiction.Entity{{ID: "keeper", Name: "Ysolde Parr", Attributes: map[string]string{"born": "1695"}}},
				Retrieval: &fiction.Retrieval{}}}
		if err := w.Add(&library.WorldEntry{Spec: spec, Provenance: library.Provenance{Source: "fiction"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	ledger := t.TempDir()
	fs, _ := fiction.NewFileStore(ledger, nil)
	obs := func(world, session, value string) fiction.Fact {
		return fiction.Fact{World: world, Entity: "keeper", Attribute: "born", Value: value, Session: session, Source: fiction.SourceObservation}
	}
	// isle-a: 4 asserted facts, one contradicts the canon; isle-b: 2 agree
	fs.AppendFacts(t.Context(), "isle-a", []fiction.Fact{obs("isle-a", "s1", "1695"), obs("isle-a", "s2", "1695"), obs("isle-a", "s3", "1702"), obs("isle-a", "s3", "1702")})
	fs.AppendFacts(t.Context(), "isle-b", []fiction.Fact{obs("isle-b", "s1", "1695"), obs("isle-b", "s2", "1695")})
	_, errOut, err := runCLI(t, "world", "check", "--all", "--worlds", dir, "--ledger", ledger)
	if err == nil {
		t.Fatal("contradictions found and no error")
	}
	for _, want := range []string{
		"world isle-a: 1 contradictions in 4 asserted facts (rate 0.2500)",
		"world isle-b: 0 contradictions in 2 asserted facts (rate 0.0000)",
		"2 worlds with facts: 1 contradictions in 6 asserted facts (rate 0.1667)",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("want %q in\n%s", want, errOut)
		}
	}
}
