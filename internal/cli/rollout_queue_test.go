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

// rolloutQueue is the setup of a rollout queue test: n tasks, a NATS
// server, the policy (textPolicy, two requests an episode) counting its
// requests by token with hold, and a single-process run's directory.
type rolloutQueue struct {
	tasks, url, ref string
	pol             *fakellm.Server
	sent            *tokenCounter
}

func newRolloutQueue(t *testing.T, n int, hold func(token string, n int) <-chan struct{}) *rolloutQueue {
	return newRolloutQueueOn(t, natstest.Start(t), n, hold, textPolicyReply)
}

// newRolloutQueueOn is newRolloutQueue with the NATS server at url and
// the policy answering with reply.
func newRolloutQueueOn(t *testing.T, url string, n int, hold func(token string, n int) <-chan struct{}, reply fakellm.Handler) *rolloutQueue {
	q := &rolloutQueue{tasks: queueTasks(t, n), url: url, ref: t.TempDir(), sent: &tokenCounter{hold: hold}}
	q.pol = fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		q.sent.arrive(r)
		return reply(r)
	})
	t.Cleanup(q.pol.Close)
	if _, err := runInProcess(append(q.args(q.ref, false), "--policy-api-key", "ref")...); err != nil {
		t.Fatal(err)
	}
	return q
}

// args is the command line of a run into out; queued, a coordinator's.
func (q *rolloutQueue) args(out string, queued bool) []string {
	args := []string{"rollout", "--tasks", q.tasks, "--policy-url", q.pol.URL, "--policy-model", "agent", "--group-size", "4", "--out", out}
	if queued {
		args = append(args, "--queue", q.url, "--ack-wait", "10s")
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
	k := newWorkerKill(24)
	q := newRolloutQueue(t, nTasks, k.hold)
	out := t.TempDir()
	stderr := k.run(t, func() (string, error) { return runInProcess(q.args(out, true)...) },
		func(name string) *exec.Cmd { return startRolloutWorker(t, q.url, name) })
	sameRollout(t, q.ref, out)
	checkCredited(t, stderr, "episodes", q.sent.counts(), 2, nTasks*group)
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
	rolloutCoordinatorKilled(t, natstest.Start(t), textPolicyReply)
}

// rolloutCoordinatorKilled is TestRolloutQueueCoordinatorKilled on the
// NATS server at url with the policy answering with reply.
func rolloutCoordinatorKilled(t *testing.T, url string, reply fakellm.Handler) {
	const nTasks, group = 24, 4
	// 60 answered requests end at least (60-8)/2 episodes: the workers
	// hold 8 at once.
	c := newCoordinatorKill(60)
	q := newRolloutQueueOn(t, url, nTasks, c.hold, reply)
	out := t.TempDir()
	coord := startQueueChild(t, "coordinator", q.args(out, true)...)
	for _, name := range []string{"w1", "w2"} {
		startRolloutWorker(t, q.url, name)
	}
	c.kill(t, coord, filepath.Join(out, rollout.EpisodesFile), 10, filepath.Join(out, rollout.SummaryFile))
	stderr, err := runInProcess(q.args(out, true)...)
	if err != nil {
		t.Fatal(err)
	}
	sameRollout(t, q.ref, out)
	n := q.sent.counts()
	if got := n["w1"] + n["w2"]; got != 2*nTasks*group {
		t.Errorf("the workers sent %d policy requests, want %d (two per episode, each episode once): %v", got, 2*nTasks*group, n)
	}
	if m := regexp.MustCompile(`\((\d+) resumed`).FindStringSubmatch(stderr); m == nil || m[1] == "0" {
		t.Errorf("the rerun resumed nothing:\n%s", stderr)
	} else {
		t.Logf("the rerun resumed %s episodes; policy requests %v", m[1], n)
	}
}
