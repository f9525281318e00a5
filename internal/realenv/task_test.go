package realenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func exampleTasks(t *testing.T) []*Task {
	t.Helper()
	tasks, err := LoadTasks(filepath.Join(repoRoot(t), "examples", "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 5 {
		t.Fatalf("only %d example tasks", len(tasks))
	}
	return tasks
}

// TestExampleTaskOracles runs every example task's oracle in the real
// terminal and requires its check to pass, and requires the check to fail
// when nothing was done (so the check can fail at all).
func TestExampleTaskOracles(t *testing.T) {
	requireSandbox(t)
	t.Parallel() // no leak check: other parallel tests run beside it
	horizons := map[string]int{}
	for _, task := range exampleTasks(t) {
		horizons[task.Horizon]++
		t.Run(task.Name, func(t *testing.T) {
			t.Parallel()
			if task.Oracle == nil {
				t.Fatal("example task has no oracle")
			}
			actions, err := task.Oracle.ActionStrings()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			recDir := t.TempDir()
			run, err := RunTask(ctx, task, actions, &RunOptions{
				Terminal:    &TerminalOptions{TempDir: t.TempDir()},
				Record:      &RecordOptions{Dir: recDir, ID: task.Name},
				Script:      task.Oracle.Script,
				CheckBefore: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			if !run.Check.Passed {
				tr := run.Recording.Trajectory()
				last := ""
				if n := len(tr.Turns); n > 0 {
					last = tr.Turns[n-1].Observation
				}
				t.Fatalf("oracle fails its check (exit %d): %s\nlast screen:\n%s", run.Check.ExitCode, run.Check.Output, last)
			}
			if run.Steps != len(actions) {
				t.Fatalf("ran %d of %d oracle actions", run.Steps, len(actions))
			}
			b, err := os.ReadFile(filepath.Join(recDir, task.Name+".json"))
			if err != nil || !strings.Contains(string(b), `"passed": true`) {
				t.Fatalf("recording lacks the check result: %v", err)
			}
			if run.Before == nil || run.Before.Passed {
				t.Fatalf("the check passes before any action: %+v", run.Before)
			}
		})
	}
	if horizons["short"] == 0 || horizons["long"] == 0 {
		t.Errorf("want short and long-horizon tasks, have %v", horizons)
	}
}

func TestLoadTaskNamesBadField(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"instruction: x\n": "field check",
		"check: 'true'\n":  "field instruction",
		"instruction: x\ncheck: 'true'\nhorizon: medium\n":                      "field horizon",
		"instruction: x\ncheck: 'true'\noracle: {actions: [[{duration: 1}]]}\n": "oracle.actions[0]",
		"instruction: x\ncheck: 'true'\nseed: nowhere\n":                        "field seed",
		"instruction: x\ncheck: 'true'\nunknown: 1\n":                           "unknown",
	}
	for body, want := range cases {
		p := filepath.Join(dir, "task.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadTask(dir)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "task.yaml") {
			t.Errorf("LoadTask(%q) err = %v, want mention of %q and the file", body, err, want)
		}
	}
}
