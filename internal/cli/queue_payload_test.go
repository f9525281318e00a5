package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/rejection"
	"github.com/agentworld/agentworld/internal/rollout"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// smallMaxPayload is the max_payload of the NATS server of the
// large-value queue tests: rows several times larger stay small.
const smallMaxPayload = 16 << 10

// longAnswer is a final answer of about n bytes that depends on seed.
func longAnswer(seed string, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		sum := sha256.Sum256([]byte(seed + string(rune(i))))
		b.WriteString(hex.EncodeToString(sum[:]))
		b.WriteByte(' ')
	}
	return b.String()
}

// TestRolloutQueueLargeRows: on a NATS server whose messages hold
// 16 KiB, a queued rollout whose episodes end with final answers of
// five times that (rows travel through the job's object store) writes
// the rows and summary of a single-process run, byte for byte apart from
// session ids, and removes the job's objects when it is done.
func TestRolloutQueueLargeRows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	url := natstest.StartWith(t, &natstest.Options{MaxPayload: smallMaxPayload})
	q := newRolloutQueueOn(t, url, 6, func(string, int) <-chan struct{} { return nil }, longPolicyReply)
	if n := countOver(t, filepath.Join(q.ref, rollout.EpisodesFile), 4*smallMaxPayload); n != 12 { // 3 issue-tracker tasks × group 4
		t.Fatalf("%d rows over 4x max_payload, want 12", n)
	}
	startRolloutWorker(t, url, "w1")
	out := t.TempDir()
	if stderr, err := runInProcess(append(q.args(out, true), "--policy-api-key", "coordinator")...); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	sameRollout(t, q.ref, out)
	noObjectStores(t, url)
}

// longPolicyReply is textPolicyReply with each issue-tracker episode's
// final answer five times smallMaxPayload long, differing per task.
func longPolicyReply(r *fakellm.Request) fakellm.Reply {
	rep := textPolicyReply(r)
	if rep.Content == "WS-31 duplicates WS-29." {
		rep.Content += " " + longAnswer(r.Messages[1].Content, 5*smallMaxPayload)
	}
	return rep
}

// TestRolloutQueueCoordinatorKilledLargeRows is
// TestRolloutQueueCoordinatorKilled on a server whose messages hold
// 16 KiB with half the rows five times that: the rows workers stored as
// objects while no coordinator ran are collected by the rerun, none is
// run again, and the files equal a single-process run's.
func TestRolloutQueueCoordinatorKilledLargeRows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	url := natstest.StartWith(t, &natstest.Options{MaxPayload: smallMaxPayload})
	rolloutCoordinatorKilled(t, url, longPolicyReply)
	noObjectStores(t, url)
}

// countOver counts the lines of file longer than n bytes.
func countOver(t *testing.T, file string, n int) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) > n {
			c++
		}
	}
	return c
}

// padField appends about n bytes to the string field of every line of
// the JSONL file, different in each file.
func padField(t *testing.T, file, field string, n int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		m[field] = fmt.Sprint(m[field]) + " " + longAnswer(file, n)
		line, _ = json.Marshal(m)
		out.Write(append(line, '\n'))
	}
	if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// noObjectStores checks that no object store is left on the server.
func noObjectStores(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var left []string
	for name := range js.ObjectStoreNames(t.Context()).Name() {
		left = append(left, name)
	}
	if len(left) != 0 {
		t.Errorf("object stores left after the run: %q", left)
	}
}

// TestBenchQueueLargeSamples: on a NATS server whose messages hold
// 16 KiB, bench run --queue with a judge prompt file (in the job's
// description), samples (system prompts) and predictions of four to five
// times that (the description, items and results travel through the
// job's object store) writes the files of a single-process run, and
// removes the job's objects when it is done.
func TestBenchQueueLargeSamples(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	url := natstest.StartWith(t, &natstest.Options{MaxPayload: smallMaxPayload})
	data := t.TempDir()
	writeBenchData(t, data, 7)
	files, _ := filepath.Glob(filepath.Join(data, "*.jsonl"))
	for _, f := range files {
		padField(t, f, "system_str", 4*smallMaxPayload)
	}
	// A judge prompt of 4x the limit makes the job's description (which
	// carries the --prompts files) go through the object store too.
	prompts := testkit.WriteOfficialPrompts(t, testkit.OfficialTemplates)
	judgePrompt := filepath.Join(prompts, "prompts", "terminal", "judge_system_prompt.txt")
	if err := os.WriteFile(judgePrompt, []byte("You judge terminal observations. "+longAnswer("judge", 4*smallMaxPayload)), 0o644); err != nil {
		t.Fatal(err)
	}
	answer := benchBackend(0)
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		rep := answer(r)
		if r.Model != "judge" {
			n := sampleNo(r)
			rep.Content = fmt.Sprintf("<predicted_observation>OBS-%d-pred %s</predicted_observation>", n, longAnswer(fmt.Sprint(n), 5*smallMaxPayload))
		}
		return rep
	})
	t.Cleanup(srv.Close)
	args := func(out string) []string {
		return []string{"bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
			"--judge-url", srv.URL, "--judge-model", "judge", "--out", out, "--retries", "0", "--judge-retries", "0", "--prompts", prompts}
	}
	ref := t.TempDir()
	if _, stderr, err := runBenchCLI(t, args(ref)...); err != nil {
		t.Fatalf("reference run: %v\n%s", err, stderr)
	}
	if n := countOver(t, filepath.Join(ref, bench.PredictionsFile), 4*smallMaxPayload); n != 7 {
		t.Fatalf("%d predictions over 4x max_payload, want 7", n)
	}
	startWorker(t, "w1", url)
	out := t.TempDir()
	if _, stderr, err := runBenchCLI(t, append(args(out), "--queue", url, "--ack-wait", "10s")...); err != nil {
		t.Fatalf("queued run: %v\n%s", err, stderr)
	}
	compareRunDirs(t, ref, out)
	noObjectStores(t, url)
}

// TestDataSampleQueueLargeBeams: on a NATS server whose messages hold
// 16 KiB, data sample --queue with samples (system prompts) and teacher
// reasoning of four to five times that (beam items and scored beams
// travel through the job's object store) writes the bytes of a
// single-process run, and removes the job's objects when it is done.
func TestDataSampleQueueLargeBeams(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a worker process")
	}
	dir := t.TempDir()
	url := natstest.StartWith(t, &natstest.Options{MaxPayload: smallMaxPayload})
	in := filepath.Join(dir, "samples.jsonl")
	writeManySamples(t, in, 6)
	padField(t, in, "system", 4*smallMaxPayload)
	sb := &sampleBackend{counts: map[string]int{}, killed: map[string]int{}}
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		rep := sb.handle(r)
		if r.Model == "teacher" {
			seed, _ := r.Body["seed"].(float64)
			long := longAnswer(fmt.Sprint(r.Messages[len(r.Messages)-1].Content, seed), 5*smallMaxPayload)
			if rep.Reasoning != "" {
				rep.Reasoning += " " + long
			} else {
				rep.Content = strings.Replace(rep.Content, "</think>", " "+long+"</think>", 1)
			}
		}
		return rep
	})
	t.Cleanup(srv.Close)
	args := func(out string) []string { return append(sampleArgs(srv.URL, out, in), "--concurrency", "8") }
	ref := filepath.Join(dir, "ref")
	if _, err := runInProcess(append(args(ref), "--teacher-api-key", "ref")...); err != nil {
		t.Fatal(err)
	}
	if n := countOver(t, filepath.Join(ref, rejection.CandidatesFile), 4*smallMaxPayload); n < 6*4 {
		t.Fatalf("%d candidates over 4x max_payload, want every one of 24", n)
	}
	startSampleWorker(t, url, "w1")
	out := filepath.Join(dir, "queued")
	if _, err := runInProcess(append(args(out), "--queue", url, "--ack-wait", "10s", "--teacher-api-key", "coordinator")...); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(readOutputs(t, ref), readOutputs(t, out)); d != "" {
		t.Errorf("outputs differ from a single-process run's:\n%s", d)
	}
	noObjectStores(t, url)
}
