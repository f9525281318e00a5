package rollout

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCurriculumKeepsTasksWithSignal(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, HistoryFile)
	run1 := &Summary{K: 2, Groups: []GroupSummary{
		{TaskID: "never", N: 2, Passed: 0}, {TaskID: "always", N: 2, Passed: 2},
		{TaskID: "mixed", N: 2, Passed: 1}, {TaskID: "flipped", N: 2, Passed: 0},
	}}
	if err := AppendHistory(h, "/runs/1", run1); err != nil {
		t.Fatal(err)
	}
	// a resumed run 1 records again: its last record counts, once
	if err := AppendHistory(h, "/runs/1", run1); err != nil {
		t.Fatal(err)
	}
	// run 2: "flipped" passes once, so over both runs it is mixed
	if err := AppendHistory(h, "/runs/2", &Summary{K: 2, Groups: []GroupSummary{{TaskID: "flipped", N: 2, Passed: 1}}}); err != nil {
		t.Fatal(err)
	}
	hist, err := ReadHistory(h)
	if err != nil {
		t.Fatal(err)
	}
	if got := hist["flipped"]; got != (PassRate{Runs: 2, N: 4, Passed: 1}) {
		t.Errorf("flipped: %+v", got)
	}
	if got := hist["never"]; got != (PassRate{Runs: 1, N: 2, Passed: 0}) {
		t.Errorf("a resumed run counted twice: %+v", got)
	}
	tasks := []Task{{ID: "never"}, {ID: "always"}, {ID: "mixed"}, {ID: "flipped"}, {ID: "new"}}
	kept, st := Curriculum(tasks, hist)
	var ids []string
	for _, t := range kept {
		ids = append(ids, t.ID)
	}
	if diff := cmp.Diff([]string{"mixed", "flipped", "new"}, ids); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if st != (CurriculumStats{Kept: 2, Unseen: 1, AlwaysFailed: 1, AlwaysPassed: 1}) {
		t.Errorf("stats %+v", st)
	}
	if h, err := ReadHistory(filepath.Join(dir, "none.jsonl")); err != nil || len(h) != 0 {
		t.Errorf("a missing history: %v, %v", h, err)
	}
	os.WriteFile(h, []byte("{not json\n"), 0o644)
	if _, err := ReadHistory(h); err == nil {
		t.Error("a malformed history was read")
	}
	if got := DefaultHistoryPath("/a/runs/r1/"); got != "/a/runs/"+HistoryFile {
		t.Errorf("DefaultHistoryPath = %s", got)
	}
}
