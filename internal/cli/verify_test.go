package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/realenv"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/verify"
)

func writeTrajectory(t *testing.T, dir string, tr trajectory.Trajectory) string {
	t.Helper()
	b, _ := json.Marshal(tr)
	p := filepath.Join(dir, tr.ID+".json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeShellSpec writes a minimal terminal world spec into dir.
func writeShellSpec(t *testing.T, dir string) string {
	t.Helper()
	spec := filepath.Join(dir, "shell.yaml")
	if err := os.WriteFile(spec, []byte("name: shell\ndomain: terminal\ntask_description: a bash shell\naction_space: JSON keystrokes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

func runVerifyCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := New()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestVerifyTeacherForced(t *testing.T) {
	dir := t.TempDir()
	spec := writeShellSpec(t, dir)
	screen1 := "root@sandbox:/app# ls\na.txt\nroot@sandbox:/app#"
	traj := writeTrajectory(t, dir, trajectory.Trajectory{ID: "real-1", Domain: "terminal", SystemPrompt: "s", Turns: []trajectory.Turn{
		{Action: `[{"keystrokes":"ls\n","duration":1}]`, Observation: screen1},
		{Action: `[{"keystrokes":"cat a.txt\n","duration":1}]`, Observation: screen1 + " cat a.txt\nhi\nroot@sandbox:/app#"},
		{Action: `[]`, Observation: screen1},
	}})
	fake := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if len(r.Messages) <= 2 { // system + first action
			return fakellm.Reply{Content: "<predicted_observation>" + screen1 + "</predicted_observation>"}
		}
		return fakellm.Reply{Content: "<predicted_observation>cat: a.txt: No such file or directory</predicted_observation>"}
	})
	defer fake.Close()
	out, err := runVerifyCLI(t, "verify", "--world", spec, "--trajectory", traj, "--model-url", fake.URL, "--model", "fake", "--max-tokens", "64")
	if err != nil {
		t.Fatal(err)
	}
	var rep verify.VerifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if rep.Mode != "teacher-forced" || len(rep.Turns) != 3 || !rep.Turns[0].Exact || rep.Turns[1].Exact || !rep.Turns[2].Skipped {
		t.Fatalf("report %+v", rep)
	}
	if rep.Summary.Turns != 2 || rep.Summary.Exact != 1 || rep.Summary.FirstDivergence != 2 {
		t.Fatalf("summary %+v", rep.Summary)
	}
	if fake.Count() != 2 {
		t.Fatalf("world model asked %d times, want 2", fake.Count())
	}
	if _, err := runVerifyCLI(t, "verify", "--trajectory", traj); err == nil || !strings.Contains(err.Error(), "--world") {
		t.Fatalf("missing --world: %v", err)
	}
}

func TestVerifyClosedLoop(t *testing.T) {
	if err := realenv.ProbeSandbox(); err != nil {
		testkit.Missing(t, "the sandbox closed-loop verification needs", err, "install bubblewrap and tmux (.ci/setup.d does)")
	}
	dir := t.TempDir()
	task := filepath.Join("..", "..", "examples", "tasks", "hello-file")
	claimed := writeTrajectory(t, dir, trajectory.Trajectory{ID: "sim-1", Domain: "terminal", SystemPrompt: "s", Turns: []trajectory.Turn{
		{Action: `[{"keystrokes":"echo 'hello agentworld' > greeting.txt\n","duration":0.3}]`, Observation: "root@sandbox:/app# echo 'hello agentworld' > greeting.txt\nroot@sandbox:/app#"},
	}})
	if out, err := runVerifyCLI(t, "verify", "--closed-loop", "--task", task, "--trajectory", claimed); err != nil || !strings.Contains(out, `"passed":true`) {
		t.Fatalf("closed loop: %v\n%s", err, out)
	}
	wrong := writeTrajectory(t, dir, trajectory.Trajectory{ID: "sim-2", Domain: "terminal", SystemPrompt: "s", Turns: []trajectory.Turn{
		{Action: `[{"keystrokes":"echo 'hello world' > greeting.txt\n","duration":0.3}]`, Observation: "root@sandbox:/app# echo 'hello world' > greeting.txt\nroot@sandbox:/app#"},
	}})
	if _, err := runVerifyCLI(t, "verify", "--closed-loop", "--task", task, "--trajectory", wrong); err == nil || !strings.Contains(err.Error(), "check fails") {
		t.Fatalf("closed loop of a failing episode: err = %v", err)
	}
}

// TestVerifyBaselineAndAllFailed: the built-in copy baseline the flag help
// names runs without a server (each turn predicts the previous real
// observation), and a run in which the simulator answered no turn at all
// exits with an error rather than a report of nothing.
func TestVerifyBaselineAndAllFailed(t *testing.T) {
	dir := t.TempDir()
	spec := writeShellSpec(t, dir)
	screen := "root@sandbox:/app# pwd\n/app\nroot@sandbox:/app#"
	traj := writeTrajectory(t, dir, trajectory.Trajectory{ID: "real-2", Domain: "terminal", SystemPrompt: "s", Turns: []trajectory.Turn{
		{Action: `[{"keystrokes":"pwd\n","duration":1}]`, Observation: screen},
		{Action: `[{"keystrokes":"pwd\n","duration":1}]`, Observation: screen},
	}})
	out, err := runVerifyCLI(t, "verify", "--world", spec, "--trajectory", traj, "--model-url", "baseline:copy")
	if err != nil {
		t.Fatalf("baseline:copy: %v", err)
	}
	var rep verify.VerifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	// Turn 1 has no earlier observation to copy (an answer saying so, not
	// an error); turn 2 copies turn 1's.
	if rep.Summary.Turns != 2 || rep.Summary.Errors != 0 || rep.Turns[0].Exact || !rep.Turns[1].Exact {
		t.Fatalf("baseline report: summary %+v, turns %+v", rep.Summary, rep.Turns)
	}

	empty := fakellm.New(func(*fakellm.Request) fakellm.Reply { return fakellm.Reply{Content: ""} })
	defer empty.Close()
	_, err = runVerifyCLI(t, "verify", "--world", spec, "--trajectory", traj, "--model-url", empty.URL, "--model", "fake", "--max-tokens", "64")
	if err == nil || !strings.Contains(err.Error(), "answered none of the 2 turns") {
		t.Fatalf("every turn failed: err %v, want a refusal", err)
	}
}
