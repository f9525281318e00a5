package cli

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/rejection"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// sampleQueue is the setup of a data sample queue test: n samples, a
// NATS server, the teacher and judge (sampleBackend) counting the
// teacher's requests (one a beam) by token with hold, and a
// single-process run's directory.
type sampleQueue struct {
	in, url, ref, dir string
	srv               *fakellm.Server
	sent              *tokenCounter
}

func newSampleQueue(t *testing.T, n int, hold func(token string, n int) <-chan struct{}) *sampleQueue {
	dir := t.TempDir()
	q := &sampleQueue{in: filepath.Join(dir, "samples.jsonl"), url: natstest.Start(t), ref: filepath.Join(dir, "ref"), dir: dir, sent: &tokenCounter{hold: hold}}
	writeManySamples(t, q.in, n)
	sb := &sampleBackend{counts: map[string]int{}, killed: map[string]int{}}
	q.srv = fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if r.Model == "teacher" {
			q.sent.arrive(r)
		}
		return sb.handle(r)
	})
	t.Cleanup(q.srv.Close)
	if _, err := runInProcess(append(q.args(q.ref, false), "--teacher-api-key", "ref")...); err != nil {
		t.Fatal(err)
	}
	return q
}

// args is the command line of a run into out; queued, a coordinator's.
func (q *sampleQueue) args(out string, queued bool) []string {
	args := append(sampleArgs(q.srv.URL, out, q.in), "--concurrency", "16")
	if queued {
		args = append(args, "--queue", q.url, "--ack-wait", "10s")
	}
	return args
}

func startSampleWorker(t *testing.T, url, name string) *exec.Cmd {
	return startQueueChild(t, name, "data", "sample", "worker", "--queue", url, "--name", name, "--concurrency", "4")
}

// TestDataSampleQueueWorkerKilled: data sample over three worker
// processes, one killed with SIGKILL while it has beams in flight
// (workerKill), writes the bytes a single-process run writes; each
// surviving worker sent the teacher exactly the beams it was credited
// with, so no beam the killed worker finished was requested again and
// none twice. Teacher requests are told apart by each worker's own key.
func TestDataSampleQueueWorkerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const nSamples, beams = 80, 4
	k := newWorkerKill(30)
	q := newSampleQueue(t, nSamples, k.hold)
	out := filepath.Join(q.dir, "queued")
	stderr := k.run(t, func() (string, error) { return runInProcess(q.args(out, true)...) },
		func(name string) *exec.Cmd { return startSampleWorker(t, q.url, name) })
	if d := cmp.Diff(readOutputs(t, q.ref), readOutputs(t, out)); d != "" {
		t.Errorf("outputs differ from a single-process run's:\n%s", d)
	}
	checkCredited(t, stderr, "beams", q.sent.counts(), 1, nSamples*beams)
}

// TestDataSampleQueueCoordinatorKilled: the coordinator killed with
// SIGKILL midway (coordinatorKill) and run again resumes its job: the
// beams the workers scored meanwhile are collected, not requested again
// (each beam's teacher request was sent once over all workers), and the
// outputs are byte-identical to a single-process run's.
func TestDataSampleQueueCoordinatorKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const nSamples, beams = 40, 4
	// 60 answered requests score at least 52 beams: the workers hold 8
	// at once.
	c := newCoordinatorKill(60)
	q := newSampleQueue(t, nSamples, c.hold)
	out := filepath.Join(q.dir, "queued")
	coord := startQueueChild(t, "coordinator", q.args(out, true)...)
	for _, name := range []string{"w1", "w2"} {
		startSampleWorker(t, q.url, name)
	}
	c.kill(t, coord, filepath.Join(out, rejection.JournalFile), 10, filepath.Join(out, rejection.SummaryFile))
	stderr, err := runInProcess(q.args(out, true)...)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(readOutputs(t, q.ref), readOutputs(t, out)); d != "" {
		t.Errorf("outputs differ from a single-process run's:\n%s", d)
	}
	n := q.sent.counts()
	if got := n["w1"] + n["w2"]; got != nSamples*beams {
		t.Errorf("the workers sent %d teacher requests, want %d (each beam once): %v", got, nSamples*beams, n)
	}
	if m := regexp.MustCompile(`(\d+) samples resumed, (\d+) scored beams`).FindStringSubmatch(stderr); m == nil || m[1]+m[2] == "00" {
		t.Errorf("the rerun resumed nothing:\n%s", stderr)
	} else {
		t.Logf("the rerun resumed %s samples and %s journaled beams; teacher requests %v", m[1], m[2], n)
	}
}
