package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// TestBenchQueueChild is one process of the work-queue tests (a bench
// worker, or a coordinator to kill): it runs the command line in
// AW_BENCH_QUEUE_ARGS until it ends or is killed.
func TestBenchQueueChild(t *testing.T) {
	raw := testkit.ChildEnv(t, "AW_BENCH_QUEUE_ARGS", "TestBenchQueueSurvivesWorkerKill")
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	root := New()
	root.SetArgs(args)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
}

var bearerRe = regexp.MustCompile(`^Bearer key-(w\d)$`)

// workerOf names the worker that sent a request, from its API key.
func workerOf(r *fakellm.Request) string {
	m := bearerRe.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return ""
	}
	return m[1]
}

// TestBenchQueueSurvivesWorkerKill is issue 27's acceptance test of work
// queues: bench run --queue over three worker processes, one killed with
// SIGKILL once it has stored results and while it holds samples; the run
// writes what a single-process run writes, no sample a worker finished is
// requested again, and no result is stored twice.
//
// The order is forced, not timed: the fake server holds the two other
// workers' requests until the victim is dead, so the victim surely works;
// the victim's requests after its sixth wait too, so it surely dies
// holding samples; it is killed once a result it stored is seen in the
// results bucket. Requests are told apart by each worker's own API key,
// and the victim's are never counted (one it sent just before the kill may
// arrive after it).
func TestBenchQueueSurvivesWorkerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three worker processes")
	}
	url := natstest.Start(t)
	data := t.TempDir()
	const samples = 42
	writeBenchData(t, data, samples)

	const victim = "w0"
	var (
		mu        sync.Mutex
		victimN   int
		signalled = make(chan struct{}) // the victim made its sixth request
		gate      = make(chan struct{}) // closed once the victim is dead
	)
	answer := benchBackend(0)
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		switch w := workerOf(r); {
		case w == victim:
			mu.Lock()
			victimN++
			n := victimN
			mu.Unlock()
			if n == 6 {
				close(signalled)
			}
			if n > 6 {
				<-gate
			}
		case w != "":
			<-gate
		}
		return answer(r)
	})
	t.Cleanup(srv.Close)
	args := func(out string) []string {
		return []string{"bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
			"--judge-url", srv.URL, "--judge-model", "judge", "--out", out, "--retries", "0", "--judge-retries", "0"}
	}

	// The single-process reference.
	ref := t.TempDir()
	if _, stderr, err := runBenchCLI(t, args(ref)...); err != nil {
		t.Fatalf("reference run: %v\n%s", err, stderr)
	}

	// Who stored each result, seen in the results bucket as it happens.
	stored := watchResults(t, url)

	// Three workers, each with its own API key.
	children := map[string]*childProc{}
	for _, w := range []string{"w0", "w1", "w2"} {
		children[w] = startWorker(t, w, url)
	}

	out := t.TempDir()
	type result struct {
		stderr string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		_, stderr, err := runBenchCLI(t, append(args(out), "--queue", url, "--concurrency", "16", "--ack-wait", "10s")...)
		done <- result{stderr, err}
	}()

	waitFor(t, signalled, "the victim's sixth request", children)
	stored.waitWorker(t, victim, children)
	children[victim].kill(t)
	close(gate)

	var res result
	select {
	case res = <-done:
	case <-time.After(queueHang):
		t.Fatalf("the queued run did not end within %s\n%s", queueHang, logs(children))
	}
	if res.err != nil {
		t.Fatalf("queued run: %v\n%s\n%s", res.err, res.stderr, logs(children))
	}
	if !strings.Contains(res.stderr, fmt.Sprintf("samples: %d done of %d (0 resumed", samples, samples)) {
		t.Errorf("queued run's summary (each sample journaled once):\n%s", res.stderr)
	}

	// The files of a single-process run.
	compareRunDirs(t, ref, out)
	if _, err := os.Stat(filepath.Join(out, bench.CacheDir)); err == nil {
		t.Errorf("the coordinator wrote a cache; it makes no calls")
	}

	// No sample a worker finished was requested again, by any surviving
	// worker; every result was stored once.
	by, puts := stored.snapshot()
	victimDone := 0
	for _, w := range by {
		if w == victim {
			victimDone++
		}
	}
	if victimDone == 0 {
		t.Fatal("the victim finished no sample before its kill; the test needs one")
	}
	// A surviving worker that finished a sample sent exactly the requests
	// the single-process run sent for it, so it did not ask one twice
	// either (the reference run's requests carry no worker's key).
	type call struct {
		worker string
		sample int
		model  string
	}
	calls := map[call]int{}
	for _, r := range srv.Requests() {
		w := workerOf(r)
		if w == victim {
			continue // possibly read after its death
		}
		n := sampleNo(r)
		calls[call{w, n, r.Model}]++
		if f, ok := by[n]; ok && w != "" && f != w {
			t.Errorf("sample %d, finished by %s, was requested again by %s (%s)", n, f, w, r.Model)
		}
	}
	// Every (sample, model) either side asked, compared for each sample a
	// survivor finished: a model it never asked counts as well as one it
	// asked twice.
	type asked struct {
		sample int
		model  string
	}
	pairs := map[asked]bool{}
	for c := range calls {
		if f, ok := by[c.sample]; ok && f != victim && (c.worker == "" || c.worker == f) {
			pairs[asked{c.sample, c.model}] = true
		}
	}
	for p := range pairs {
		f := by[p.sample]
		if got, want := calls[call{f, p.sample, p.model}], calls[call{"", p.sample, p.model}]; got != want {
			t.Errorf("sample %d: %s, which finished it, asked %s %d times; the single-process run asked %d",
				p.sample, f, p.model, got, want)
		}
	}
	for n, k := range puts {
		if k != 1 {
			t.Errorf("sample %d: %d results stored, want 1", n, k)
		}
	}
	t.Logf("%d samples: %d finished by the killed worker, %d results seen stored", samples, victimDone, len(by))
}

// childProc is a worker process and its log.
type childProc struct {
	name string
	log  string
	stop func()
}

func startWorker(t *testing.T, name, url string) *childProc {
	t.Helper()
	return startChildProc(t, name, []string{"bench", "worker", "--queue", url, "--concurrency", "2", "--name", name},
		"AGENTWORLD_MODEL_API_KEY=key-"+name, "AGENTWORLD_JUDGE_API_KEY=key-"+name, "OPENAI_API_KEY=")
}

// startChildProc runs a command line in a child process, its output in a
// log file.
func startChildProc(t *testing.T, name string, argv []string, env ...string) *childProc {
	t.Helper()
	args, _ := json.Marshal(argv)
	cmd := testkit.Child("TestBenchQueueChild", append(env, "AW_BENCH_QUEUE_ARGS="+string(args))...)
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cmd.Stdout, cmd.Stderr = f, f
	testkit.StartChild(t, cmd)
	return &childProc{name: name, log: log, stop: func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }}
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *childProc) kill(t *testing.T) {
	t.Helper()
	c.stop()
}

// logs is every worker's log, for a failure message.
func logs(children map[string]*childProc) string {
	var b strings.Builder
	for _, c := range children {
		out, _ := os.ReadFile(c.log)
		fmt.Fprintf(&b, "--- worker %s:\n%s\n", c.name, out)
	}
	return b.String()
}

func waitFor(t *testing.T, ch <-chan struct{}, what string, children map[string]*childProc) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(queueHang):
		t.Fatalf("no %s within %s\n%s", what, queueHang, logs(children))
	}
}

// resultWatch records, per sample number, the worker that stored its
// result and how many results were stored.
type resultWatch struct {
	mu      sync.Mutex
	by      map[int]string
	puts    map[int]int
	changed chan struct{} // closed and replaced on every change
}

func (w *resultWatch) snapshot() (map[int]string, map[int]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	by, puts := map[int]string{}, map[int]int{}
	for k, v := range w.by {
		by[k] = v
	}
	for k, v := range w.puts {
		puts[k] = v
	}
	return by, puts
}

// waitWorker waits until a result stored by worker is seen.
func (w *resultWatch) waitWorker(t *testing.T, worker string, children map[string]*childProc) {
	t.Helper()
	deadline := time.After(queueHang)
	for {
		w.mu.Lock()
		ch := w.changed
		found := false
		for _, x := range w.by {
			found = found || x == worker
		}
		w.mu.Unlock()
		if found {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no result stored by %s within %s\n%s", worker, queueHang, logs(children))
		}
	}
}

var predRe = regexp.MustCompile(`OBS-(\d+)-pred`)

// watchResults watches the jobs bucket for the bench job and its results
// bucket for every result stored.
func watchResults(t *testing.T, url string) *resultWatch {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	jobs, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: workqueue.DefaultJobsBucket})
	if err != nil {
		t.Fatal(err)
	}
	jw, err := jobs.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := &resultWatch{by: map[int]string{}, puts: map[int]int{}, changed: make(chan struct{})}
	record := func(v []byte) {
		var r workqueue.Result
		var res bench.SampleResult
		if json.Unmarshal(v, &r) != nil || json.Unmarshal(r.Payload, &res) != nil || res.Prediction == nil {
			t.Errorf("unreadable stored result %q", v)
			return
		}
		m := predRe.FindStringSubmatch(res.Prediction.Prediction)
		if m == nil {
			t.Errorf("stored result without a sample number: %+v", res.Prediction)
			return
		}
		n, _ := strconv.Atoi(m[1])
		w.mu.Lock()
		w.by[n] = r.Worker
		w.puts[n]++
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { _ = jw.Stop() }()
		seen := map[string]bool{}
		for e := range jw.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut || seen[e.Key()] {
				continue
			}
			seen[e.Key()] = true
			kv, err := js.KeyValue(ctx, workqueue.ResultsBucket(e.Key()))
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("results bucket of job %s: %v", e.Key(), err)
				}
				continue
			}
			rw, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
			if err != nil {
				t.Errorf("watch the results of job %s: %v", e.Key(), err)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = rw.Stop() }()
				for e := range rw.Updates() {
					if e != nil && e.Operation() == jetstream.KeyValuePut {
						record(e.Value())
					}
				}
			}()
		}
	}()
	return w
}

// compareRunDirs compares the result files of two runs of the same data:
// run.json and scores.json byte for byte, the rows with the latency of
// each call (the only measured field) left out.
func compareRunDirs(t *testing.T, want, got string) {
	t.Helper()
	for _, f := range []string{bench.RunFile, bench.ScoresFile} {
		a, errA := os.ReadFile(filepath.Join(want, f))
		b, errB := os.ReadFile(filepath.Join(got, f))
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", f, errA, errB)
		}
		if d := cmp.Diff(string(a), string(b)); d != "" {
			t.Errorf("%s differs from the single-process run's (-want +got):\n%s", f, d)
		}
	}
	rows := func(dir string) []bench.Judged {
		b, err := os.ReadFile(filepath.Join(dir, bench.JudgedFile))
		if err != nil {
			t.Fatal(err)
		}
		js := testkit.DecodeLines[bench.Judged](t, b)
		p, err := os.ReadFile(filepath.Join(dir, bench.PredictionsFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range testkit.DecodeLines[bench.Prediction](t, p) {
			js = append(js, bench.Judged{Prediction: pr})
		}
		for i := range js {
			if js[i].Usage != nil {
				js[i].Usage.LatencyMS = 0
			}
		}
		return js
	}
	if d := cmp.Diff(rows(want), rows(got)); d != "" {
		t.Errorf("rows differ from the single-process run's (-want +got):\n%s", d)
	}
}

// TestBenchQueueCoordinatorKill: the coordinator of bench run --queue is
// killed with SIGKILL midway while two workers go on; the same command
// run again resumes the same job: it ends with a single-process run's
// files, and no sample reaches the model or the judge twice (the workers'
// results stored while no coordinator ran are taken as they are).
func TestBenchQueueCoordinatorKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker and coordinator processes")
	}
	url := natstest.Start(t)
	data := t.TempDir()
	const samples = 42
	writeBenchData(t, data, samples)
	// The workers' requests after their twelfth judge request wait until
	// the coordinator is dead, so that it surely dies before the end.
	var (
		mu     sync.Mutex
		judged int
		gate   = make(chan struct{})
	)
	answer := benchBackend(0)
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if workerOf(r) != "" {
			mu.Lock()
			if r.Model == "judge" {
				judged++
			}
			wait := judged > 12
			mu.Unlock()
			if wait {
				<-gate
			}
		}
		return answer(r)
	})
	t.Cleanup(srv.Close)
	args := func(out string) []string {
		return []string{"bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
			"--judge-url", srv.URL, "--judge-model", "judge", "--out", out, "--retries", "0", "--judge-retries", "0"}
	}
	ref := t.TempDir()
	if _, stderr, err := runBenchCLI(t, args(ref)...); err != nil {
		t.Fatalf("reference run: %v\n%s", err, stderr)
	}
	children := map[string]*childProc{}
	for _, w := range []string{"w1", "w2"} {
		children[w] = startWorker(t, w, url)
	}
	out := t.TempDir()
	queued := append(args(out), "--queue", url, "--concurrency", "4", "--ack-wait", "10s")
	coord := startChildProc(t, "coordinator", queued, "AGENTWORLD_MODEL_API_KEY=key-c", "AGENTWORLD_JUDGE_API_KEY=key-c")
	children["coordinator"] = coord
	// Killed once some samples are journaled (polled: at most 12 can be
	// before the gate opens).
	deadline := time.Now().Add(queueHang)
	for len(rowSamples(t, filepath.Join(out, bench.JudgedFile))) < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator journaled nothing within %s\n%s", queueHang, logs(children))
		}
		time.Sleep(10 * time.Millisecond)
	}
	coord.kill(t)
	close(gate)

	_, stderr, err := runBenchCLI(t, queued...)
	if err != nil {
		t.Fatalf("resumed run: %v\n%s\n%s", err, stderr, logs(children))
	}
	if strings.Contains(stderr, "(0 resumed") {
		t.Errorf("the rerun resumed nothing:\n%s", stderr)
	}
	compareRunDirs(t, ref, out)
	calls := map[string]int{}
	for _, r := range srv.Requests() {
		if w := workerOf(r); w != "" {
			calls[fmt.Sprintf("%s %d", r.Model, sampleNo(r))]++
		}
	}
	for k, n := range calls {
		if n != 1 {
			t.Errorf("%s requested %d times by the workers, want once", k, n)
		}
	}
	if len(calls) != 2*samples {
		t.Errorf("the workers requested %d (model or judge, sample) pairs, want %d", len(calls), 2*samples)
	}
}

// TestBenchQueueBadInput: the queue commands refuse what they cannot do,
// naming the flag, before anything is written.
func TestBenchQueueBadInput(t *testing.T) {
	data := t.TempDir()
	writeBenchData(t, data, 3)
	out := filepath.Join(t.TempDir(), "run")
	run := []string{"bench", "run", "--data", data, "--model-url", "http://127.0.0.1:1/v1", "--model", "wm", "--judge", "rules", "--out", out}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"worker without a queue", []string{"bench", "worker"}, "missing required flag: --queue"},
		{"worker, no server", []string{"bench", "worker", "--queue", "nats://127.0.0.1:1"}, "--queue: connect to NATS at nats://127.0.0.1:1"},
		{"run, no server", append(run, "--queue", "nats://127.0.0.1:1"), "--queue: connect to NATS at nats://127.0.0.1:1"},
		{"run, not a URL", append(run, "--queue", "http://[::1"), "--queue: connect to NATS"},
		{"otel", append(run, "--queue", "nats://127.0.0.1:1", "--otel-endpoint", "http://127.0.0.1:1"), "--otel-endpoint cannot be used with --queue"},
		{"cache", append(run, "--queue", "nats://127.0.0.1:1", "--cache", t.TempDir()), "--cache cannot be used with --queue"},
		{"ack-wait", append(run, "--queue", "nats://127.0.0.1:1", "--ack-wait", "-1s"), "--ack-wait"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, err := runBenchCLI(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q\n%s", err, c.want, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was created by a refused command", out)
			}
		})
	}
}

// TestBenchJobCarriesFlagsAndFiles: a bench job carries the flags that
// decide results and the files of --prompts and --template-dir, never an
// API key or the coordinator's paths; a worker prepared from it sends the
// requests a local run sends and writes the same rows.
func TestBenchJobCarriesFlagsAndFiles(t *testing.T) {
	prompts := testkit.WriteOfficialPrompts(t, testkit.OfficialTemplates)
	lib := t.TempDir()
	if _, stderr, err := runBenchCLI(t, "template", "import", "--official", prompts, "--template-dir", lib); err != nil {
		t.Fatalf("template import: %v\n%s", err, stderr)
	}
	const gen = "<predicted_observation>\n**Environment Observation:**\nok\n</predicted_observation>"
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if r.Model == "judge" {
			return fakellm.Reply{Content: fixedVerdict}
		}
		return fakellm.Reply{Content: gen}
	})
	t.Cleanup(srv.Close)
	data := filepath.Join("..", "..", "examples", "bench", "terminal_test.jsonl")
	out := filepath.Join(t.TempDir(), "local")
	args := []string{"--data", data, "--out", out, "--model-url", srv.URL, "--model", "wm", "--max-tokens", "512",
		"--judge-url", srv.URL, "--judge-model", "judge", "--prompts", prompts, "--template-dir", lib, "--template", "official-0123456",
		"--api-key", "sk-model-secret", "--judge-api-key", "sk-judge-secret"}
	if _, stderr, err := runBenchCLI(t, append([]string{"bench", "run"}, args...)...); err != nil {
		t.Fatalf("local run: %v\n%s", err, stderr)
	}
	localReqs := srv.Requests()
	srv.Reset()

	var f benchRunFlags
	cmd := &cobra.Command{Use: "run"}
	f.register(cmd)
	cmd.SetContext(context.Background())
	if err := cmd.ParseFlags(append(args, "--queue", "nats://127.0.0.1:1")); err != nil {
		t.Fatal(err)
	}
	spec, err := f.jobSpec(cmd)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(spec)
	for _, leak := range []string{"sk-", data, out, "nats://", prompts, lib} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("the job description holds %q: %s", leak, raw)
		}
	}
	if len(spec.Files["prompts"]) == 0 || len(spec.Files["template-dir"]) == 0 {
		t.Fatalf("the job carries no files of --prompts or --template-dir: %v", spec.Files)
	}

	process, err := startBenchJob(cmd, workqueue.Job{ID: "bench-test", Kind: benchJobKind, Spec: raw}, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := trajectory.ReadFile(data, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, bench.JudgedFile))
	if err != nil {
		t.Fatal(err)
	}
	want := testkit.DecodeLines[bench.Judged](t, b)
	var got []bench.Judged
	for _, row := range want {
		payload, err := bench.MarshalSample(&bench.Sample{Sample: row.Sample, File: row.File, Line: row.Line, Record: recs[row.Line-1]})
		if err != nil {
			t.Fatal(err)
		}
		res, err := process(context.Background(), workqueue.Item{ID: row.Sample, Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		var r bench.SampleResult
		if err := json.Unmarshal(res, &r); err != nil || r.Judged == nil {
			t.Fatalf("result %s: %v", res, err)
		}
		got = append(got, *r.Judged)
	}
	for _, rows := range [][]bench.Judged{want, got} {
		for i := range rows {
			if rows[i].Usage != nil {
				rows[i].Usage.LatencyMS = 0
			}
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the worker's rows differ from the local run's (-local +worker):\n%s", d)
	}
	msgs := func(reqs []*fakellm.Request) []string {
		var out []string
		for _, r := range reqs {
			b, _ := json.Marshal(r.Messages)
			out = append(out, r.Model+" "+string(b))
		}
		slices.Sort(out)
		return out
	}
	if d := cmp.Diff(msgs(localReqs), msgs(srv.Requests())); d != "" {
		t.Errorf("the worker's requests differ from the local run's (-local +worker):\n%s", d)
	}
	for _, r := range srv.Requests() {
		if k := r.Header.Get("Authorization"); strings.Contains(k, "secret") {
			t.Errorf("the worker sent the coordinator's key %q", k)
		}
	}
}
