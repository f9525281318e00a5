package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/natsconn"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// TestQueueCoordinatorFailingOnInputLeavesNoJob: a coordinator (bench
// run, data sample, rollout with --queue) that fails before it queues any
// item, here on input it cannot read, an output it cannot write or one
// holding another run's settings, leaves no job on the server: no job
// stream, no results or objects bucket, no entry in the jobs bucket
// (which workers would serve for ever, since the corrected command pins
// another job id). bench run, rollout and "data
// sample, --out" go through Abandon (no result yet); "data sample,
// missing input" fails once the run has a result, so it goes through
// Finish, which removed its job before Abandon existed too.
func TestQueueCoordinatorFailingOnInputLeavesNoJob(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	notDir := filepath.Join(dir, "a-file")
	if err := os.WriteFile(notDir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// rollout refuses an --out it cannot create before it opens a job;
	// one holding another run's settings it finds only after.
	otherRun := filepath.Join(dir, "other-run")
	if err := os.MkdirAll(otherRun, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(otherRun, "run.json"), []byte(`{"policy_model":"another"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args func(url string) []string
	}{
		{"bench run", func(url string) []string {
			return []string{"bench", "run", "--queue", url, "--data", missing, "--model-url", "http://127.0.0.1:1/v1",
				"--model", "wm", "--judge", "rules", "--out", filepath.Join(dir, "bench")}
		}},
		{"data sample, --out", func(url string) []string {
			return append(sampleArgs("http://127.0.0.1:1", filepath.Join(notDir, "sample"), notDir), "--queue", url)
		}},
		{"data sample, missing input", func(url string) []string {
			return append(sampleArgs("http://127.0.0.1:1", filepath.Join(dir, "sample"), missing), "--queue", url)
		}},
		{"rollout", func(url string) []string {
			return []string{"rollout", "--tasks", queueTasks(t, 2), "--policy-url", "http://127.0.0.1:1/v1", "--policy-model", "agent",
				"--out", otherRun, "--queue", url}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := natstest.Start(t)
			stderr, err := runInProcess(c.args(url)...)
			if err == nil {
				t.Fatalf("the run succeeded; want it to fail on its input\n%s", stderr)
			}
			t.Logf("failed as it should: %v", strings.SplitN(err.Error(), "\n", 2)[0])
			if left := queueLeftovers(t, url); len(left) > 0 {
				t.Errorf("left on the server: %s", strings.Join(left, ", "))
			}
		})
	}
}

// queueLeftovers lists the work-queue streams (jobs' streams, results and
// objects buckets) on the server at url, and the jobs bucket's keys.
// The jobs bucket must exist: a coordinator's Open creates it and
// nothing removes it, so its absence means the run failed before it
// opened a job, which tests nothing here.
func queueLeftovers(t *testing.T, url string) []string {
	t.Helper()
	nc, err := natsconn.Dial(url, "leftovers")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var left []string
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		if name != "KV_"+workqueue.DefaultJobsBucket {
			left = append(left, "stream "+name)
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	jobs, err := js.KeyValue(ctx, workqueue.DefaultJobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := jobs.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		left = append(left, "job "+k)
	}
	return left
}
