package library

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/filelock"
	"github.com/agentworld/agentworld/internal/world"
)

func testWorld(name, domain string, tags ...string) *WorldEntry {
	s := &world.Spec{Name: name, Domain: "mcp", TaskDescription: "a tracker of " + name,
		ActionSpace: world.ActionSpace{Tools: []world.Tool{{Name: "get"}}}}
	if domain == "terminal" {
		s = &world.Spec{Name: name, Domain: "terminal", TaskDescription: "a shell", ActionSpace: world.ActionSpace{Description: "keys"}}
	}
	return &WorldEntry{Spec: s, Tags: tags, Provenance: Provenance{Source: "seed", Model: "m1", Seed: 7, Parent: "seed-1"}}
}

func testTask(id, w, diff string) *TaskEntry {
	return &TaskEntry{ID: id, World: w, Instruction: "close WS-9", Difficulty: diff,
		Check:      &world.SuccessRule{FinalObservation: "closed"},
		Reference:  []json.RawMessage{json.RawMessage(`"{\"name\":\"get\",\"arguments\":{}}"`)},
		Provenance: Provenance{Source: "seed", Parent: w}}
}

func fill(t *testing.T, dir string) {
	t.Helper()
	w, err := Create(dir, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		name := fmt.Sprintf("w%02d", i)
		d, tag := "mcp", "tracker"
		if i%2 == 1 {
			d, tag = "terminal", "shell"
		}
		diff := []string{Easy, Medium, Hard}[i%3]
		if err := w.Add(testWorld(name, d, tag), []*TaskEntry{testTask(name+"-t1", name, diff), testTask(name+"-t2", name, Easy)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestAddListFilter(t *testing.T) {
	dir := t.TempDir()
	fill(t, dir)
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := l.Worlds(Filter{Domain: "terminal"}, func(w *WorldEntry) error {
		names = append(names, w.Spec.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"w01", "w03", "w05", "w07", "w09"}, names); diff != "" {
		t.Errorf("terminal worlds (-want +got):\n%s", diff)
	}
	var hard []string
	if err := l.Tasks(Filter{Difficulty: Hard, Domain: "mcp"}, func(t *TaskEntry, d string) error {
		hard = append(hard, t.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(hard)
	// hard: i%3 == 2 → w02, w05, w08; mcp: even i → w02, w08
	if diff := cmp.Diff([]string{"w02-t1", "w08-t1"}, hard); diff != "" {
		t.Errorf("hard mcp tasks (-want +got):\n%s", diff)
	}
	c, err := l.Count(Filter{Tags: []string{"shell"}, Source: "seed", Model: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Worlds != 5 || c.Tasks != 0 { // tasks carry no tags
		t.Errorf("counts %+v", c)
	}
	if c, _ := l.Count(Filter{Model: "other"}); c.Worlds != 0 {
		t.Errorf("model filter let %d through", c.Worlds)
	}
	// shards: a world's tasks are in its world's shard
	if err := l.Tasks(Filter{}, func(t *TaskEntry, _ string) error {
		if l.shard(t.World) != l.shard(t.ID[:3]) {
			return errors.New("shard mismatch")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, WorldsDir, "*.jsonl"))
	if len(files) < 2 {
		t.Errorf("%d world shards used, want several", len(files))
	}
}

func TestSpecsServeTasksAsWorlds(t *testing.T) {
	dir := t.TempDir()
	fill(t, dir)
	l, _ := Open(dir)
	specs, err := l.Specs()
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 30 {
		t.Fatalf("%d specs, want 10 worlds + 20 task worlds", len(specs))
	}
	ts := specs["w03-t1"]
	if ts == nil || ts.Reward == nil || ts.Reward.Success.FinalObservation != "closed" || ts.Domain != "terminal" {
		t.Fatalf("task world = %+v", ts)
	}
	if specs["w03"].Reward != nil {
		t.Error("the task's check leaked into its base world")
	}
	if err := ts.Validate(); err != nil {
		t.Errorf("task world invalid: %v", err)
	}
}

func TestSampleIsSeededAndBounded(t *testing.T) {
	dir := t.TempDir()
	fill(t, dir)
	l, _ := Open(dir)
	draw := func(seed int64) []string {
		s := NewSample[string](3, seed)
		l.Tasks(Filter{}, func(t *TaskEntry, _ string) error { s.Offer(t.ID); return nil })
		return s.Out
	}
	a, b := draw(1), draw(1)
	if len(a) != 3 || !slices.Equal(a, b) {
		t.Errorf("seeded samples %v and %v", a, b)
	}
	if slices.Equal(a, draw(2)) && slices.Equal(a, draw(3)) {
		t.Errorf("three seeds drew the same sample %v", a)
	}
}

func TestTornLineAndLock(t *testing.T) {
	dir := t.TempDir()
	fill(t, dir)
	l, _ := Open(dir)
	// a kill mid-write leaves a torn last line: readers skip it, the next
	// writer cuts it
	p := l.shardPath(WorldsDir, l.shard("w00"))
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"spec":{"name":"torn`)
	f.Close()
	c, err := l.Count(Filter{})
	if err != nil || c.Worlds != 10 {
		t.Fatalf("count after a torn line = %+v, %v", c, err)
	}
	w, err := Create(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if w.Shards() != 4 {
		t.Errorf("reopened with %d shards, want the library's 4", w.Shards())
	}
	if _, err := Create(dir, 0); !errors.Is(err, filelock.ErrHeld) {
		t.Errorf("a second writer: %v, want ErrHeld", err)
	}
	if err := w.Add(testWorld("w00b", "mcp"), nil); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if c, err := l.Count(Filter{}); err != nil || c.Worlds != 11 {
		t.Fatalf("count after an append = %+v, %v", c, err)
	}
}

func TestBadEntriesNamed(t *testing.T) {
	dir := t.TempDir()
	w, _ := Create(dir, 1)
	defer w.Close()
	bad := testTask("x y", "w", Easy)
	if err := w.Add(testWorld("w", "mcp"), []*TaskEntry{bad}); err == nil {
		t.Error("a task id with a space was stored")
	}
	other := testTask("t", "elsewhere", Easy)
	if err := w.Add(testWorld("w", "mcp"), []*TaskEntry{other}); err == nil {
		t.Error("a task of another world was stored")
	}
	os.MkdirAll(filepath.Join(dir, WorldsDir), 0o755)
	os.WriteFile(filepath.Join(dir, WorldsDir, "000.jsonl"), []byte("{\"spec\":{\"name\":\"q\",\"domain\":\"nope\"}}\n"), 0o644)
	l, _ := Open(dir)
	_, err := l.Count(Filter{})
	if err == nil || !contains(err.Error(), "000.jsonl:1") {
		t.Errorf("a bad stored world: %v, want the file and line named", err)
	}
	if _, err := Open(t.TempDir()); err == nil {
		t.Error("an empty directory opened as a library")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestTaskSpecJudgeSeesTheInstruction(t *testing.T) {
	base := testWorld("w", "mcp").Spec
	tk := testTask("w-t1", "w", Easy)
	tk.Check = &world.SuccessRule{Judge: &world.SuccessJudge{Criterion: "WS-9 is closed"}}
	s := TaskSpec(base, tk)
	if got := s.Reward.Success.Judge.Criterion; !strings.Contains(got, "close WS-9") || !strings.Contains(got, "WS-9 is closed") {
		t.Errorf("criterion %q", got)
	}
	if tk.Check.Judge.Criterion != "WS-9 is closed" {
		t.Error("the stored check was changed")
	}
}
