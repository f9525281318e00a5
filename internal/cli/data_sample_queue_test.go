package cli

import (
	"bytes"
	"context"
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

	"github.com/agentworld/agentworld/internal/rejection"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// queueBackend is sampleBackend as teacher and judge, counting the
// teacher requests of each bearer token and letting hold decide, per
// teacher request, whether to wait before answering (it gets the
// token's count so far, this request included).
type queueBackend struct {
	sb   *sampleBackend
	srv  *fakellm.Server
	mu   sync.Mutex
	by   map[string]int
	hold func(token string, n int) <-chan struct{}
}

func newQueueBackend(t *testing.T, hold func(token string, n int) <-chan struct{}) *queueBackend {
	b := &queueBackend{sb: &sampleBackend{counts: map[string]int{}, killed: map[string]int{}}, by: map[string]int{}, hold: hold}
	b.srv = fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if r.Model == "teacher" {
			token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			b.mu.Lock()
			b.by[token]++
			n := b.by[token]
			b.mu.Unlock()
			if ch := b.hold(token, n); ch != nil {
				<-ch
			}
		}
		return b.sb.handle(r)
	})
	t.Cleanup(b.srv.Close)
	return b
}

func (b *queueBackend) counts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.by))
	for k, v := range b.by {
		out[k] = v
	}
	return out
}

// sampleRun runs data sample (with queue, the coordinator) in process and
// returns its stderr.
func sampleRun(srvURL, out, in, queue string, extra ...string) (string, error) {
	args := append(sampleArgs(srvURL, out, in), "--concurrency", "16")
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
		return stderr.String(), err
	}
	return stderr.String(), nil
}

// beamCounts reads the coordinator's "beams by worker" line.
func beamCounts(t *testing.T, stderr string) map[string]int {
	t.Helper()
	m := regexp.MustCompile(`beams by worker: (.*)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no beams by worker line in:\n%s", stderr)
	}
	out := map[string]int{}
	for _, part := range strings.Split(m[1], ", ") {
		name, n, _ := strings.Cut(part, " ")
		v, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("beams by worker: %q", m[1])
		}
		out[name] = v
	}
	return out
}

// TestDataSampleQueueWorkerKilled: data sample over three worker
// processes, one killed with SIGKILL while it has beams in flight, writes
// the bytes a single-process run writes; each surviving worker sent the
// teacher exactly the requests of the beams it was credited with, so no
// beam the killed worker finished was requested again and none twice.
// Teacher requests are told apart by each worker's own API key.
func TestDataSampleQueueWorkerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const (
		nSamples = 80
		beams    = 4
		killAt   = 30 // the killed worker's teacher requests before the kill
	)
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	writeManySamples(t, in, nSamples)
	url := natstest.Start(t)
	var (
		killNow  = make(chan struct{})
		killOnce sync.Once
		killed   = make(chan struct{})
		release  = make(chan struct{})
	)
	b := newQueueBackend(t, func(token string, n int) <-chan struct{} {
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

	ref := filepath.Join(dir, "ref")
	if stderr, err := sampleRun(b.srv.URL, ref, in, "", "--teacher-api-key", "ref"); err != nil {
		t.Fatalf("reference run: %v\n%s", err, stderr)
	}
	out := filepath.Join(dir, "queued")
	type result struct {
		stderr string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		stderr, err := sampleRun(b.srv.URL, out, in, url)
		done <- result{stderr, err}
	}()
	workers := map[string]*exec.Cmd{}
	for _, name := range []string{"k", "s1", "s2"} {
		workers[name] = startSampleWorker(t, url, name)
	}
	select {
	case <-killNow:
	case <-time.After(queueHang):
		t.Fatal("the worker to kill sent too few teacher requests")
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
		t.Fatalf("coordinator: %v\n%s", res.err, res.stderr)
	}
	if d := cmp.Diff(readOutputs(t, ref), readOutputs(t, out)); d != "" {
		t.Errorf("outputs differ from a single-process run's:\n%s", d)
	}
	credited := beamCounts(t, res.stderr)
	total := 0
	for _, n := range credited {
		total += n
	}
	if total != nSamples*beams {
		t.Errorf("workers credited with %d beams, want %d: %v", total, nSamples*beams, credited)
	}
	sent := b.counts()
	for _, s := range []string{"s1", "s2"} {
		if sent[s] != credited[s] {
			t.Errorf("survivor %s sent %d teacher requests for the %d beams it was credited with", s, sent[s], credited[s])
		}
	}
	if sent["k"] < credited["k"] {
		t.Errorf("the killed worker sent %d teacher requests, fewer than its %d credited beams", sent["k"], credited["k"])
	}
	if _, err := os.Stat(filepath.Join(out, rejection.SummaryFile)); err != nil {
		t.Error(err)
	}
	t.Logf("teacher requests %v; beams credited %v", sent, credited)
}

// startSampleWorker starts a `data sample worker` child whose teacher key
// is its name.
func startSampleWorker(t *testing.T, url, name string) *exec.Cmd {
	t.Helper()
	return startQueueChild(t, name, "data", "sample", "worker", "--queue", url, "--name", name, "--concurrency", "4")
}

// TestDataSampleQueueCoordinatorKilled: the coordinator killed with
// SIGKILL midway and run again resumes its job: the beams the workers
// scored meanwhile are collected, not requested again (each beam's
// teacher request was sent once over all workers), and the outputs are
// byte-identical to a single-process run's.
func TestDataSampleQueueCoordinatorKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const (
		nSamples = 40
		beams    = 4
		holdAt   = 60 // teacher requests answered before the kill
	)
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	writeManySamples(t, in, nSamples)
	url := natstest.Start(t)
	var (
		mu     sync.Mutex
		total  int
		killed = make(chan struct{})
	)
	b := newQueueBackend(t, func(token string, _ int) <-chan struct{} {
		if token == "ref" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if total++; total > holdAt {
			return killed
		}
		return nil
	})
	t.Cleanup(func() { // before the server closes
		select {
		case <-killed:
		default:
			close(killed)
		}
	})
	ref := filepath.Join(dir, "ref")
	if stderr, err := sampleRun(b.srv.URL, ref, in, "", "--teacher-api-key", "ref"); err != nil {
		t.Fatalf("reference run: %v\n%s", err, stderr)
	}
	out := filepath.Join(dir, "queued")
	coord := startQueueChild(t, "coordinator", append(sampleArgs(b.srv.URL, out, in), "--concurrency", "16", "--queue", url, "--ack-wait", "10s")...)
	for _, name := range []string{"w1", "w2"} {
		startSampleWorker(t, url, name)
	}
	// The teacher answers holdAt requests, so at least holdAt-8 beams are
	// scored (8 are in the workers' hands at once); wait for 10 in the
	// coordinator's journal.
	journal := filepath.Join(out, rejection.JournalFile)
	deadline := time.Now().Add(queueHang)
	for {
		data, _ := os.ReadFile(journal)
		if bytes.Count(data, []byte("\n")) >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the coordinator journaled too few beams")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := coord.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = coord.Wait()
	close(killed)
	if _, err := os.Stat(filepath.Join(out, rejection.SummaryFile)); err == nil {
		t.Fatal("the coordinator finished before the kill")
	}
	stderr, err := sampleRun(b.srv.URL, out, in, url)
	if err != nil {
		t.Fatalf("resumed coordinator: %v\n%s", err, stderr)
	}
	m := regexp.MustCompile(`(\d+) samples resumed, (\d+) scored beams`).FindStringSubmatch(stderr)
	if m == nil || m[1]+m[2] == "00" {
		t.Errorf("the rerun resumed nothing:\n%s", stderr)
	} else {
		t.Logf("the rerun resumed %s samples and %s journaled beams", m[1], m[2])
	}
	if d := cmp.Diff(readOutputs(t, ref), readOutputs(t, out)); d != "" {
		t.Errorf("outputs differ from a single-process run's:\n%s", d)
	}
	sent := b.counts()
	if n := sent["w1"] + sent["w2"]; n != nSamples*beams {
		t.Errorf("the workers sent %d teacher requests, want %d (each beam once): %v", n, nSamples*beams, sent)
	}
	t.Logf("teacher requests %v", sent)
}
