package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/rollout"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// queueTasks writes n rollout tasks over the two example worlds (the
// embedded replay answers them), each with its own instruction.
func queueTasks(t *testing.T, n int) string {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"id": "t%02d", "world": "issue-tracker-mcp", "instruction": "Triage the newest open issues of WS (#%d).", "max_turns": 8}`+"\n", i, i)
		} else {
			fmt.Fprintf(&b, `{"id": "t%02d", "world": "python-terminal", "instruction": "Print the Python version (#%d).", "max_turns": 6}`+"\n", i, i)
		}
	}
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// queuePolicy is textPolicy (two policy requests an episode) counting
// its requests by token.
func queuePolicy(t *testing.T, hold func(token string, n int) <-chan struct{}) (*fakellm.Server, *tokenCounter) {
	c := &tokenCounter{hold: hold}
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		c.arrive(r)
		return textPolicyReply(r)
	})
	t.Cleanup(srv.Close)
	return srv, c
}

// rolloutArgs is the rollout command line of the queue tests (with
// queue, a coordinator's).
func rolloutArgs(tasks, polURL, out, queue string) []string {
	args := []string{"rollout", "--tasks", tasks, "--policy-url", polURL, "--policy-model", "agent", "--group-size", "4", "--out", out}
	if queue != "" {
		args = append(args, "--queue", queue, "--ack-wait", "10s")
	}
	return args
}

func startRolloutWorker(t *testing.T, url, name string) *exec.Cmd {
	return startQueueChild(t, name, "rollout", "worker", "--queue", url, "--name", name, "--concurrency", "4")
}

// sameRollout checks that dir holds the rows and summary of ref, each
// episode once.
func sameRollout(t *testing.T, ref, dir string) {
	t.Helper()
	got := readRolloutRows(t, dir)
	seen := map[string]bool{}
	for _, r := range got {
		k := fmt.Sprintf("%s/%d", r.GroupID, r.SampleIdx)
		if seen[k] {
			t.Errorf("episode %s written twice", k)
		}
		seen[k] = true
	}
	if diff := cmp.Diff(readRolloutRows(t, ref), got); diff != "" {
		t.Errorf("rows differ from a single-process run's (-local +queue):\n%s", diff)
	}
	want, _ := os.ReadFile(filepath.Join(ref, rollout.SummaryFile))
	have, _ := os.ReadFile(filepath.Join(dir, rollout.SummaryFile))
	if diff := cmp.Diff(string(want), string(have)); diff != "" {
		t.Errorf("summary differs from a single-process run's (-local +queue):\n%s", diff)
	}
}

// TestRolloutQueueWorkerKilled: a rollout over three worker processes,
// one killed with SIGKILL while it has episodes in flight (workerKill),
// ends with the rows and summary of a single-process run, every episode
// once; each surviving worker sent the policy exactly the two requests of
// each episode it was credited with, so no episode finished by the killed
// worker was run again and none ran twice. Requests are told apart by
// each worker's own API key, so one the killed worker sent just before
// dying counts as its own whenever it arrives.
func TestRolloutQueueWorkerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const nTasks, group = 40, 4
	tasks := queueTasks(t, nTasks)
	url := natstest.Start(t)
	k := newWorkerKill(24)
	pol, sent := queuePolicy(t, k.hold)
	ref := t.TempDir()
	if _, err := runInProcess(append(rolloutArgs(tasks, pol.URL, ref, ""), "--policy-api-key", "ref")...); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	stderr := k.run(t, func() (string, error) { return runInProcess(rolloutArgs(tasks, pol.URL, out, url)...) },
		func(name string) *exec.Cmd { return startRolloutWorker(t, url, name) })
	sameRollout(t, ref, out)
	checkCredited(t, stderr, "episodes", sent.counts(), 2, nTasks*group)
}

// TestRolloutQueueCoordinatorKilled: the coordinator killed with SIGKILL
// midway (coordinatorKill) and run again resumes its job: the workers'
// episodes finished meanwhile are collected, not run again (each
// episode's two policy requests were sent once over all workers), and the
// run ends with the rows and summary of a single-process run, every
// episode once.
func TestRolloutQueueCoordinatorKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const nTasks, group = 24, 4
	tasks := queueTasks(t, nTasks)
	url := natstest.Start(t)
	// 60 answered requests end at least (60-8)/2 episodes: the workers
	// hold 8 at once.
	c := newCoordinatorKill(60)
	pol, sent := queuePolicy(t, c.hold)
	ref := t.TempDir()
	if _, err := runInProcess(append(rolloutArgs(tasks, pol.URL, ref, ""), "--policy-api-key", "ref")...); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	coord := startQueueChild(t, "coordinator", rolloutArgs(tasks, pol.URL, out, url)...)
	for _, name := range []string{"w1", "w2"} {
		startRolloutWorker(t, url, name)
	}
	c.kill(t, coord, filepath.Join(out, rollout.EpisodesFile), 10, filepath.Join(out, rollout.SummaryFile))
	stderr, err := runInProcess(rolloutArgs(tasks, pol.URL, out, url)...)
	if err != nil {
		t.Fatal(err)
	}
	sameRollout(t, ref, out)
	n := sent.counts()
	if got := n["w1"] + n["w2"]; got != 2*nTasks*group {
		t.Errorf("the workers sent %d policy requests, want %d (two per episode, each episode once): %v", got, 2*nTasks*group, n)
	}
	if m := regexp.MustCompile(`\((\d+) resumed`).FindStringSubmatch(stderr); m == nil || m[1] == "0" {
		t.Errorf("the rerun resumed nothing:\n%s", stderr)
	} else {
		t.Logf("the rerun resumed %s episodes; policy requests %v", m[1], n)
	}
}
