package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/rollout"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// queueHang bounds the waits of the queue tests: it only ends a hang,
// it never decides a result.
const queueHang = 4 * time.Minute

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

// queuePolicy is textPolicy (two policy turns an episode) that counts
// the requests of each bearer token and lets hold decide, per request,
// whether to wait before answering (it is called in arrival order per
// token with that token's count so far, this request included).
type queuePolicy struct {
	srv  *fakellm.Server
	mu   sync.Mutex
	by   map[string]int
	hold func(token string, n int) <-chan struct{}
}

func newQueuePolicy(t *testing.T, hold func(token string, n int) <-chan struct{}) *queuePolicy {
	p := &queuePolicy{by: map[string]int{}, hold: hold}
	p.srv = fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		p.mu.Lock()
		p.by[token]++
		n := p.by[token]
		p.mu.Unlock()
		if p.hold != nil {
			if ch := p.hold(token, n); ch != nil {
				<-ch
			}
		}
		return textPolicyReply(r)
	})
	t.Cleanup(p.srv.Close)
	return p
}

func (p *queuePolicy) counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.by))
	for k, v := range p.by {
		out[k] = v
	}
	return out
}

// TestQueueChild is a worker or coordinator process of the queue tests;
// it does nothing in a normal test run.
func TestQueueChild(t *testing.T) {
	runChildCLI(t, "AGENTWORLD_QUEUE_CHILD", "the queue tests")
}

// startQueueChild starts this test binary as a child running the command
// line args with token as its policy and model API keys, logging to a file of the test's
// (shown when the test fails); it is killed when the test ends.
func startQueueChild(t *testing.T, token string, args ...string) *exec.Cmd {
	t.Helper()
	argv, _ := json.Marshal(args)
	cmd := testkit.Child("TestQueueChild", "AGENTWORLD_QUEUE_CHILD="+string(argv),
		envconfig.PolicyAPIKey.Name+"="+token, envconfig.ModelAPIKey.Name+"="+token)
	log, err := os.Create(filepath.Join(t.TempDir(), token+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s's log:\n%s", token, b)
		}
		log.Close()
	})
	testkit.StartChild(t, cmd)
	return cmd
}

// workerCounts reads the coordinator's "episodes by worker" line.
func workerCounts(t *testing.T, stderr string) map[string]int {
	t.Helper()
	m := regexp.MustCompile(`episodes by worker: (.*)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no episodes by worker line in:\n%s", stderr)
	}
	out := map[string]int{}
	for _, part := range strings.Split(m[1], ", ") {
		name, n, _ := strings.Cut(part, " ")
		v, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("episodes by worker: %q", m[1])
		}
		out[name] = v
	}
	return out
}

// rolloutRun runs the coordinator (or with queue "" a local run) in
// process and returns its stderr.
func rolloutRun(tasks, polURL, out, queue string, extra ...string) (string, error) {
	args := []string{"rollout", "--tasks", tasks, "--policy-url", polURL, "--policy-model", "agent", "--group-size", "4", "--out", out}
	if queue != "" {
		args = append(args, "--queue", queue, "--ack-wait", "10s")
	}
	root := New()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(append(args, extra...))
	err := root.ExecuteContext(context.Background())
	if err != nil {
		err = fmt.Errorf("rollout (queue %q): %w\n%s", queue, err, stderr.String())
	}
	return stderr.String(), err
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
// one killed with SIGKILL while it has episodes in flight, ends with the
// rows and summary of a single-process run, every episode once; each
// surviving worker sent the policy exactly the requests of the episodes
// it was credited with (two a episode), so no episode finished by the
// killed worker was run again and none ran twice. Requests are told
// apart by each worker's own API key, so one the killed worker sent just
// before dying counts as its own whenever it arrives.
func TestRolloutQueueWorkerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const (
		nTasks = 40
		group  = 4
		killAt = 24 // the killed worker's policy requests before the kill
	)
	tasks := queueTasks(t, nTasks)
	url := natstest.Start(t)
	var (
		killNow  = make(chan struct{})
		killOnce sync.Once
		// killed is closed once the worker is dead: the survivors' requests
		// wait for it, so the killed worker runs alone until then; its own
		// requests from the killAt-th on wait for ever (until cleanup), so it
		// dies with episodes in flight.
		killed  = make(chan struct{})
		release = make(chan struct{})
	)
	pol := newQueuePolicy(t, func(token string, n int) <-chan struct{} {
		switch token {
		case "ref":
			return nil
		case "k":
			if n >= killAt {
				killOnce.Do(func() { close(killNow) })
				return release
			}
			return nil
		}
		return killed
	})
	t.Cleanup(func() { // before the server closes
		select {
		case <-killed:
		default:
			close(killed)
		}
		close(release)
	})

	ref := t.TempDir()
	if _, err := rolloutRun(tasks, pol.srv.URL, ref, "", "--policy-api-key", "ref"); err != nil {
		t.Fatal(err)
	}

	out := t.TempDir()
	type result struct {
		stderr string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		stderr, err := rolloutRun(tasks, pol.srv.URL, out, url)
		done <- result{stderr, err}
	}()
	workers := map[string]*exec.Cmd{}
	for _, name := range []string{"k", "s1", "s2"} {
		workers[name] = startQueueChild(t, name, "rollout", "worker", "--queue", url, "--name", name, "--concurrency", "4")
	}
	select {
	case <-killNow:
	case <-time.After(queueHang):
		t.Fatal("the worker to kill sent too few requests")
	}
	if err := workers["k"].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = workers["k"].Wait()
	close(killed)
	var res result
	select {
	case res = <-done:
	case <-time.After(queueHang):
		t.Fatal("the coordinator did not finish")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	sameRollout(t, ref, out)

	credited := workerCounts(t, res.stderr)
	total := 0
	for _, n := range credited {
		total += n
	}
	if total != nTasks*group {
		t.Errorf("workers credited with %d episodes, want %d: %v", total, nTasks*group, credited)
	}
	sent := pol.counts()
	for _, s := range []string{"s1", "s2"} {
		if sent[s] != 2*credited[s] {
			t.Errorf("survivor %s sent %d policy requests for the %d episodes it was credited with, want %d", s, sent[s], credited[s], 2*credited[s])
		}
	}
	if sent["k"] < 2*credited["k"] {
		t.Errorf("the killed worker sent %d policy requests, fewer than its %d credited episodes need", sent["k"], credited["k"])
	}
	t.Logf("policy requests %v; episodes credited %v", sent, credited)
}

// TestRolloutQueueCoordinatorKilled: the coordinator killed with SIGKILL
// midway and run again resumes its job: the workers' episodes finished
// meanwhile are collected, not run again (each episode's two policy
// requests were sent once over all workers), and the run ends with the
// rows and summary of a single-process run, every episode once.
func TestRolloutQueueCoordinatorKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const (
		nTasks = 24
		group  = 4
		holdAt = 60 // policy requests answered before the kill
	)
	tasks := queueTasks(t, nTasks)
	url := natstest.Start(t)
	var (
		mu      sync.Mutex
		total   int
		killed  = make(chan struct{})
		release = make(chan struct{})
	)
	pol := newQueuePolicy(t, func(token string, n int) <-chan struct{} {
		if token == "ref" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		total++
		if total > holdAt {
			return killed
		}
		return nil
	})
	t.Cleanup(func() {
		select {
		case <-killed:
		default:
			close(killed)
		}
		close(release)
	})

	ref := t.TempDir()
	if _, err := rolloutRun(tasks, pol.srv.URL, ref, "", "--policy-api-key", "ref"); err != nil {
		t.Fatal(err)
	}

	out := t.TempDir()
	args := []string{"rollout", "--tasks", tasks, "--policy-url", pol.srv.URL, "--policy-model", "agent", "--group-size", "4", "--out", out,
		"--queue", url, "--ack-wait", "10s"}
	coord := startQueueChild(t, "coordinator", args...)
	for _, name := range []string{"w1", "w2"} {
		startQueueChild(t, name, "rollout", "worker", "--queue", url, "--name", name, "--concurrency", "4")
	}
	// The policy answers holdAt requests, so at least (holdAt-16)/2
	// episodes end (16 are out at once); wait for 10 rows.
	path := filepath.Join(out, rollout.EpisodesFile)
	deadline := time.Now().Add(queueHang)
	for {
		b, _ := os.ReadFile(path)
		if bytes.Count(b, []byte("\n")) >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the coordinator journaled too few rows")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := coord.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = coord.Wait()
	close(killed)
	if _, err := os.Stat(filepath.Join(out, rollout.SummaryFile)); err == nil {
		t.Fatal("the coordinator finished before the kill")
	}
	stderr, err := rolloutRun(tasks, pol.srv.URL, out, url)
	if err != nil {
		t.Fatal(err)
	}
	sameRollout(t, ref, out)
	sent := pol.counts()
	if n := sent["w1"] + sent["w2"]; n != 2*nTasks*group {
		t.Errorf("the workers sent %d policy requests, want %d (two per episode, each episode once): %v", n, 2*nTasks*group, sent)
	}
	m := regexp.MustCompile(`\((\d+) resumed`).FindStringSubmatch(stderr)
	if m == nil || m[1] == "0" {
		t.Errorf("the rerun resumed nothing:\n%s", stderr)
	} else {
		t.Logf("the rerun resumed %s episodes; policy requests %v", m[1], sent)
	}
}
