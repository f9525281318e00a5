package rollout

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit"
)

const killDirEnv = "AGENTWORLD_ROLLOUT_KILL_DIR"

// killTasks are 64 tasks, each naming the issue its agent reads.
func killTasks() []Task { return issueTasks(64) }

// issueTasks are n tasks, each naming the issue its agent reads.
func issueTasks(n int) []Task {
	tasks := make([]Task, n)
	for i := range tasks {
		tasks[i] = Task{ID: fmt.Sprintf("task-%02d", i), World: "tracker", Instruction: fmt.Sprintf("Check WS-%d.", i)}
	}
	return tasks
}

// fakeCalls counts the requests a run sent to its fakes.
type fakeCalls struct{ policy, worldModel int }

// runKillTasks rolls out killTasks × G=8 into dir with fresh fakes; delay
// slows each policy answer, and the policy never answers past its first
// stallAfter requests when that is positive (the run cannot finish before
// the test kills it, however a loaded machine schedules the two
// processes). Each episode costs two policy requests (a tool call, then
// the answer) and one world-model request (the tool call's result).
func runKillTasks(t testing.TB, dir string, delay time.Duration, stallAfter int) (*Result, fakeCalls, error) {
	m, model := fakeWorld(t)
	var asked atomic.Int64
	pol := newFakePolicy(t, func(msgs []Message) string {
		if stallAfter > 0 && asked.Add(1) > int64(stallAfter) {
			select {} // killed here
		}
		time.Sleep(delay)
		return byInstruction(msgs)
	})
	res, err := Run(context.Background(), Embedded{M: m}, killTasks(), dir, &Options{
		Policy: &Policy{URL: pol.srv.URL + "/v1", Model: "pol"}, GroupSize: 8, MaxInFlight: 4,
	})
	return res, fakeCalls{policy: int(pol.count.Load()), worldModel: model.Count()}, err
}

// TestKillChild is the process TestKillNineResume kills; it does nothing
// in a normal test run. It finishes at most 300 of its 512 episodes.
func TestKillChild(t *testing.T) {
	dir := testkit.ChildEnv(t, killDirEnv, "TestKillNineResume")
	if _, _, err := runKillTasks(t, dir, 3*time.Millisecond, 600); err != nil {
		t.Fatal(err)
	}
}

// TestKillNineResume: 64 tasks × G=8, killed with SIGKILL mid-run and
// rerun, give every episode exactly once and the same rows as a run never
// interrupted (session ids aside, which a new simulator assigns afresh).
// The rerun's fakes see the requests of the unfinished episodes only: no
// finished episode is run again.
func TestKillNineResume(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	cmd := testkit.Child("TestKillChild", killDirEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // it stalls instead of ending
	path := filepath.Join(dir, EpisodesFile)
	deadline := time.After(2 * time.Minute)
	for killed := false; !killed; {
		select {
		case err := <-exited:
			t.Fatalf("child ended before the kill: %v", err)
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("child wrote too few rows in 2 minutes")
		case <-time.After(2 * time.Millisecond):
		}
		b, _ := os.ReadFile(path)
		if n := bytes.Count(b, []byte("\n")); n >= 64 {
			if n >= 512 {
				t.Fatalf("child finished (%d rows) before the kill", n)
			}
			if err := cmd.Process.Signal(os.Kill); err != nil {
				t.Fatal(err)
			}
			<-exited
			killed = true
		}
	}
	before, err := readRows(path)
	if err != nil {
		t.Fatal(err)
	}
	res, calls, err := runKillTasks(t, dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != len(before) || res.Resumed+res.Done != 512 {
		t.Fatalf("killed after %d rows; rerun resumed %d, did %d", len(before), res.Resumed, res.Done)
	}
	if want := (fakeCalls{policy: 2 * (512 - len(before)), worldModel: 512 - len(before)}); calls != want {
		t.Errorf("killed after %d rows, the rerun sent %+v, want %+v", len(before), calls, want)
	}
	got, err := readRows(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[key]bool{}
	for _, r := range got {
		k := key{r.GroupID, r.SampleIdx}
		if seen[k] {
			t.Errorf("episode %v repeated", k)
		}
		seen[k] = true
	}
	ref := t.TempDir()
	if _, _, err := runKillTasks(t, ref, 0, 0); err != nil {
		t.Fatal(err)
	}
	want, err := readRows(filepath.Join(ref, EpisodesFile))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(normalize(want), normalize(got)); diff != "" {
		t.Errorf("resumed run differs from an uninterrupted one (-want +got):\n%s", diff)
	}
	wantSum, _ := os.ReadFile(filepath.Join(ref, SummaryFile))
	gotSum, _ := os.ReadFile(filepath.Join(dir, SummaryFile))
	if diff := cmp.Diff(string(wantSum), string(gotSum)); diff != "" {
		t.Errorf("summary differs (-want +got):\n%s", diff)
	}
}

// normalize orders rows by episode and blanks the session ids.
func normalize(rows []Row) []Row {
	out := append([]Row(nil), rows...)
	for i := range out {
		out[i].EnvSessionID, out[i].ForkParent = "", ""
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GroupID != out[j].GroupID {
			return out[i].GroupID < out[j].GroupID
		}
		return out[i].SampleIdx < out[j].SampleIdx
	})
	return out
}
