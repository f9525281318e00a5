package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
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
	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// TestJobFlagsRoundTrip: the flags a coordinator hands its workers are
// those given on its command line but for its own and the secrets, and a
// worker's copy of the command parses them back to the same values,
// repeated flags included.
func TestJobFlagsRoundTrip(t *testing.T) {
	t.Setenv(envconfig.PolicyAPIKey.Name, "")
	var got []string
	var secrets []string
	cmd := newRolloutCmd()
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		got, secrets = jobFlags(cmd, rolloutCoordinatorFlags...)
		return nil
	}
	cmd.SetArgs([]string{"--tasks", "t.jsonl", "--out", "o", "--policy-url", "http://p/v1", "--policy-model", "m",
		"--policy-api-key", "sk-secret", "--sim-api-key", "sk-2", "--replica", "http://a/v1", "--replica", "http://b,c/v1",
		"--policy-temperature", "0.7", "--group-size", "3", "--concurrency", "64", "--queue", "nats://q:4222", "--ack-wait", "5s",
		"--step-timeout", "90s", "--replay-strict"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, f := range got {
		for _, bad := range []string{"sk-", "--tasks", "--out", "--concurrency", "--queue", "--ack-wait"} {
			if strings.Contains(f, bad) {
				t.Errorf("job flag %q: the coordinator's own or a secret", f)
			}
		}
	}
	if diff := cmp.Diff([]string{"--policy-api-key", "--sim-api-key"}, secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	spec, _ := json.Marshal(jobSpec{Flags: got})
	var r rolloutFlags
	w, err := jobCommand(context.Background(), cmd, workqueue.Job{ID: "j", Kind: "rollout", Spec: spec}, r.register)
	if err != nil {
		t.Fatal(err)
	}
	o, err := r.options(w)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"http://a/v1", "http://b,c/v1"}, r.f.cfg.Replicas); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
	if o.Policy.URL != "http://p/v1" || o.Policy.APIKey != "" || *o.Policy.Temperature != 0.7 || o.GroupSize != 3 ||
		r.stepTimeout.String() != "1m30s" || !r.f.cfg.ReplayStrict || r.tasksPath != "" || r.out != "" {
		t.Errorf("worker's settings: policy %+v group %d step timeout %s strict %v tasks %q out %q",
			*o.Policy, o.GroupSize, r.stepTimeout, r.f.cfg.ReplayStrict, r.tasksPath, r.out)
	}
}

// queueHang bounds the waits of the queue tests: it only ends a hang,
// it never decides a result.
const queueHang = 4 * time.Minute

// TestQueueChild is a worker or coordinator process of the queue tests;
// it does nothing in a normal test run.
func TestQueueChild(t *testing.T) {
	runChildCLI(t, "AGENTWORLD_QUEUE_CHILD", "the queue tests")
}

// startQueueChild starts this test binary as a child running the command
// line args with token as its policy and model API keys, logging to a
// file of the test's (shown when the test fails); it is killed when the
// test ends.
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

// runInProcess runs a command line of the CLI in this process and
// returns its stderr.
func runInProcess(args ...string) (string, error) {
	root := New()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		err = fmt.Errorf("%s: %w\n%s", strings.Join(args[:2], " "), err, stderr.String())
	}
	return stderr.String(), err
}

// tokenCounter counts a fake model server's requests by bearer token and
// lets hold decide, per request, whether it waits before it is answered
// (hold gets the token's count so far, this request included).
type tokenCounter struct {
	mu   sync.Mutex
	by   map[string]int
	hold func(token string, n int) <-chan struct{}
}

// arrive counts r and waits as hold says.
func (c *tokenCounter) arrive(r *fakellm.Request) {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	c.mu.Lock()
	if c.by == nil {
		c.by = map[string]int{}
	}
	c.by[token]++
	n := c.by[token]
	c.mu.Unlock()
	if ch := c.hold(token, n); ch != nil {
		<-ch
	}
}

func (c *tokenCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.by)
}

// workerKill stages a queued run over three workers, "k", "s1" and
// "s2", one of which, "k", is killed with SIGKILL with work in flight:
// k runs alone until its killAt-th counted request, which waits (as do
// its later ones) until the test ends, so it dies mid-item; the
// survivors' requests wait until k is dead. The reference run's token,
// "ref", never waits. Nothing is decided by time.
type workerKill struct {
	killAt                   int
	killNow, killed, release chan struct{}
	once                     sync.Once
}

func newWorkerKill(killAt int) *workerKill {
	return &workerKill{killAt: killAt, killNow: make(chan struct{}), killed: make(chan struct{}), release: make(chan struct{})}
}

// hold is the tokenCounter's hold.
func (k *workerKill) hold(token string, n int) <-chan struct{} {
	switch token {
	case "ref":
		return nil
	case "k":
		if n >= k.killAt {
			k.once.Do(func() { close(k.killNow) })
			return k.release
		}
		return nil
	}
	return k.killed
}

// run starts coordinate (the queued run, in process) and the three
// workers (start), kills k, and returns the coordinator's stderr once it
// ended. Call it after the fake server started: the requests it holds
// are let go before the server closes.
func (k *workerKill) run(t *testing.T, coordinate func() (string, error), start func(name string) *exec.Cmd) string {
	t.Helper()
	t.Cleanup(func() {
		select {
		case <-k.killed:
		default:
			close(k.killed)
		}
		close(k.release)
	})
	type result struct {
		stderr string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		stderr, err := coordinate()
		done <- result{stderr, err}
	}()
	workers := map[string]*exec.Cmd{}
	for _, name := range []string{"k", "s1", "s2"} {
		workers[name] = start(name)
	}
	select {
	case <-k.killNow:
	case <-time.After(queueHang):
		t.Fatal("the worker to kill sent too few requests")
	}
	if err := workers["k"].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = workers["k"].Wait()
	close(k.killed)
	var res result
	select {
	case res = <-done:
	case <-time.After(queueHang):
		t.Fatal("the coordinator did not finish")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	return res.stderr
}

// checkCredited checks the counted requests of a worker-kill run: every
// item of total was credited to a worker (the coordinator's "WHAT by
// worker" line), each survivor sent exactly per requests for each item
// credited to it (so it did no item twice and none k had finished), and
// k finished at least one and sent at least the requests of its own.
func checkCredited(t *testing.T, stderr, what string, sent map[string]int, per, total int) {
	t.Helper()
	m := regexp.MustCompile(what + ` by worker: (.*)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no %s by worker line in:\n%s", what, stderr)
	}
	credited := map[string]int{}
	sum := 0
	for _, part := range strings.Split(m[1], ", ") {
		name, n, _ := strings.Cut(part, " ")
		v, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("%s by worker: %q", what, m[1])
		}
		credited[name] = v
		sum += v
	}
	if sum != total {
		t.Errorf("workers credited with %d %s, want %d: %v", sum, what, total, credited)
	}
	for _, s := range []string{"s1", "s2"} {
		if sent[s] != per*credited[s] {
			t.Errorf("survivor %s sent %d requests for the %d %s it was credited with, want %d", s, sent[s], credited[s], what, per*credited[s])
		}
	}
	if credited["k"] == 0 {
		t.Errorf("the killed worker was credited with no %s: the run did not test that what it finished is not done again", what)
	}
	if sent["k"] < per*credited["k"] {
		t.Errorf("the killed worker sent %d requests, fewer than its %d credited %s need", sent["k"], credited["k"], what)
	}
	t.Logf("requests %v; %s credited %v", sent, what, credited)
}

// coordinatorKill stages a queued run whose coordinator, a child
// process, is killed with SIGKILL midway: the workers' requests are
// answered until holdAt of them were, and wait after that until the
// coordinator is dead. The reference run's token, "ref", never waits.
type coordinatorKill struct {
	holdAt int
	mu     sync.Mutex
	total  int
	killed chan struct{}
}

func newCoordinatorKill(holdAt int) *coordinatorKill {
	return &coordinatorKill{holdAt: holdAt, killed: make(chan struct{})}
}

// hold is the tokenCounter's hold.
func (c *coordinatorKill) hold(token string, _ int) <-chan struct{} {
	if token == "ref" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total++; c.total > c.holdAt {
		return c.killed
	}
	return nil
}

// kill waits until journal has lines lines, kills coord and lets the
// workers go on; call it after the fake server started. It fails the
// test when the coordinator had written summary (it finished).
func (c *coordinatorKill) kill(t *testing.T, coord *exec.Cmd, journal string, lines int, summary string) {
	t.Helper()
	t.Cleanup(func() {
		select {
		case <-c.killed:
		default:
			close(c.killed)
		}
	})
	deadline := time.Now().Add(queueHang)
	for {
		b, _ := os.ReadFile(journal)
		if bytes.Count(b, []byte("\n")) >= lines {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator journaled fewer than %d lines", lines)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := coord.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = coord.Wait()
	close(c.killed)
	if _, err := os.Stat(summary); err == nil {
		t.Fatal("the coordinator finished before the kill")
	}
}
