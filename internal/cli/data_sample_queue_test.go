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

// queueTeacher is sampleBackend as teacher and judge, counting the
// teacher's requests (one a beam) by token.
func queueTeacher(t *testing.T, hold func(token string, n int) <-chan struct{}) (*fakellm.Server, *tokenCounter) {
	sb := &sampleBackend{counts: map[string]int{}, killed: map[string]int{}}
	c := &tokenCounter{hold: hold}
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if r.Model == "teacher" {
			c.arrive(r)
		}
		return sb.handle(r)
	})
	t.Cleanup(srv.Close)
	return srv, c
}

// sampleQueueArgs is the data sample command line of the queue tests
// (with queue, a coordinator's).
func sampleQueueArgs(srvURL, out, in, queue string) []string {
	args := append(sampleArgs(srvURL, out, in), "--concurrency", "16")
	if queue != "" {
		args = append(args, "--queue", queue, "--ack-wait", "10s")
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
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	writeManySamples(t, in, nSamples)
	url := natstest.Start(t)
	k := newWorkerKill(30)
	srv, sent := queueTeacher(t, k.hold)
	ref := filepath.Join(dir, "ref")
	if _, err := runInProcess(append(sampleQueueArgs(srv.URL, ref, in, ""), "--teacher-api-key", "ref")...); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "queued")
	stderr := k.run(t, func() (string, error) { return runInProcess(sampleQueueArgs(srv.URL, out, in, url)...) },
		func(name string) *exec.Cmd { return startSampleWorker(t, url, name) })
	if d := cmp.Diff(readOutputs(t, ref), readOutputs(t, out)); d != "" {
		t.Errorf("outputs differ from a single-process run's:\n%s", d)
	}
	checkCredited(t, stderr, "beams", sent.counts(), 1, nSamples*beams)
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
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	writeManySamples(t, in, nSamples)
	url := natstest.Start(t)
	// 60 answered requests score at least 52 beams: the workers hold 8
	// at once.
	c := newCoordinatorKill(60)
	srv, sent := queueTeacher(t, c.hold)
	ref := filepath.Join(dir, "ref")
	if _, err := runInProcess(append(sampleQueueArgs(srv.URL, ref, in, ""), "--teacher-api-key", "ref")...); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "queued")
	coord := startQueueChild(t, "coordinator", sampleQueueArgs(srv.URL, out, in, url)...)
	for _, name := range []string{"w1", "w2"} {
		startSampleWorker(t, url, name)
	}
	c.kill(t, coord, filepath.Join(out, rejection.JournalFile), 10, filepath.Join(out, rejection.SummaryFile))
	stderr, err := runInProcess(sampleQueueArgs(srv.URL, out, in, url)...)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(readOutputs(t, ref), readOutputs(t, out)); d != "" {
		t.Errorf("outputs differ from a single-process run's:\n%s", d)
	}
	n := sent.counts()
	if got := n["w1"] + n["w2"]; got != nSamples*beams {
		t.Errorf("the workers sent %d teacher requests, want %d (each beam once): %v", got, nSamples*beams, n)
	}
	if m := regexp.MustCompile(`(\d+) samples resumed, (\d+) scored beams`).FindStringSubmatch(stderr); m == nil || m[1]+m[2] == "00" {
		t.Errorf("the rerun resumed nothing:\n%s", stderr)
	} else {
		t.Logf("the rerun resumed %s samples and %s journaled beams; teacher requests %v", m[1], m[2], n)
	}
}
