package workqueue_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/jetstore"
	_ "github.com/agentworld/agentworld/internal/natsserver" // the embedded server
	"github.com/agentworld/agentworld/internal/workqueue"
)

// hang bounds every wait of these tests: it only ends a hang, it never
// decides a result.
const hang = 2 * time.Minute

// server runs an embedded NATS server for the test and returns a function
// opening in-process connections to it, each closed at the end.
func server(t *testing.T) func() *nats.Conn {
	t.Helper()
	srv, err := jetstore.StartServer(jetstore.ServerOptions{Name: "wq", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return func() *nats.Conn {
		nc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
}

// counter counts Process calls per item.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[id]++
}

func (c *counter) get() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// echo is a Start whose Process answers "<job spec>:<payload>", counting.
func echo(c *counter) workqueue.Start {
	return func(_ context.Context, job workqueue.Job) (workqueue.Process, error) {
		return func(_ context.Context, it workqueue.Item) ([]byte, error) {
			c.add(it.ID)
			return []byte(string(job.Spec) + ":" + string(it.Payload)), nil
		}, nil
	}
}

// worker runs Work in the background until the test ends or stop is
// called; stop waits for it and checks it ended for being stopped.
func worker(t *testing.T, nc *nats.Conn, start workqueue.Start, o *workqueue.WorkerOptions) (stop func()) {
	return runWorker(t, nc, start, o, true)
}

func runWorker(t *testing.T, nc *nats.Conn, start workqueue.Start, o *workqueue.WorkerOptions, check bool) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- workqueue.Work(ctx, nc, "test", start, o) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; check && !errors.Is(err, context.Canceled) {
				t.Errorf("Work = %v, want context.Canceled", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func open(t *testing.T, nc *nats.Conn, job workqueue.Job, o *workqueue.Options) *workqueue.Coordinator {
	t.Helper()
	c, err := workqueue.Open(t.Context(), nc, job, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testJob(spec string) workqueue.Job {
	return workqueue.Job{ID: workqueue.JobID("test", []byte(spec)), Kind: "test", Spec: []byte(`"` + spec + `"`)}
}

// doAll runs items 0..n-1 concurrently and returns their payloads.
func doAll(t *testing.T, c *workqueue.Coordinator, n int) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	defer cancel()
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("item %d/x.y", i) // not a subject token as it is
			r, err := c.Do(ctx, workqueue.Item{ID: id, Payload: []byte(fmt.Sprint(i))})
			if err != nil {
				t.Errorf("Do(%s): %v", id, err)
				return
			}
			if r.ID != id {
				t.Errorf("Do(%s) returned the result of %s", id, r.ID)
			}
			mu.Lock()
			got[id] = string(r.Payload)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return got
}

func want(spec string, n int) (map[string]string, map[string]int) {
	payloads, counts := map[string]string{}, map[string]int{}
	for i := range n {
		id := fmt.Sprintf("item %d/x.y", i)
		payloads[id] = fmt.Sprintf("%q:%d", spec, i)
		counts[id] = 1
	}
	return payloads, counts
}

// TestEveryItemOnce: two workers share a job's items; each item is
// processed once, its result reaches the coordinator, and Finish removes
// the job's stream, bucket and description.
func TestEveryItemOnce(t *testing.T) {
	connect := server(t)
	var calls counter
	worker(t, connect(), echo(&calls), &workqueue.WorkerOptions{Name: "a", Concurrency: 3})
	worker(t, connect(), echo(&calls), &workqueue.WorkerOptions{Name: "b", Concurrency: 2})
	nc := connect()
	job := testJob("spec")
	c := open(t, nc, job, nil)
	got := doAll(t, c, 40)
	wantPayloads, wantCounts := want("spec", 40)
	if d := cmp.Diff(wantPayloads, got); d != "" {
		t.Errorf("results (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantCounts, calls.get()); d != "" {
		t.Errorf("process calls per item (-want +got):\n%s", d)
	}
	if err := c.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	if _, err := js.Stream(t.Context(), workqueue.JobStream(job.ID)); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream after Finish: %v, want ErrStreamNotFound", err)
	}
	if _, err := js.KeyValue(t.Context(), workqueue.ResultsBucket(job.ID)); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("results bucket after Finish: %v, want ErrBucketNotFound", err)
	}
	jobs, err := js.KeyValue(t.Context(), workqueue.DefaultJobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Get(t.Context(), job.ID); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("job description after Finish: %v, want ErrKeyNotFound", err)
	}
}

// blocker is a Start whose Process reports each item it got and then
// waits for release (or its context).
type blocker struct {
	got     chan string
	release chan struct{}
}

func newBlocker() *blocker {
	return &blocker{got: make(chan string, 16), release: make(chan struct{})}
}

func (b *blocker) start(context.Context, workqueue.Job) (workqueue.Process, error) {
	return func(ctx context.Context, it workqueue.Item) ([]byte, error) {
		b.got <- it.ID
		select {
		case <-b.release:
			return []byte("late"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}, nil
}

// recv waits for one value of ch, failing the test after hang.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hang):
		t.Fatalf("no %s after %s", what, hang)
		panic("unreachable")
	}
}

type outcome struct {
	r   workqueue.Result
	err error
}

func doAsync(t *testing.T, c *workqueue.Coordinator, it workqueue.Item) <-chan outcome {
	out := make(chan outcome, 1)
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	go func() {
		defer cancel()
		r, err := c.Do(ctx, it)
		out <- outcome{r, err}
	}()
	return out
}

// TestRedeliveryAfterWorkerDies: a worker takes an item and loses its
// connection (no ack, no heartbeat: as a killed process); after AckWait
// the item goes to another worker, whose result the coordinator gets.
func TestRedeliveryAfterWorkerDies(t *testing.T) {
	connect := server(t)
	c := open(t, connect(), testJob("dies"), &workqueue.Options{AckWait: time.Second})
	dead := newBlocker()
	ncDead := connect()
	// Its Work ends with the connection, whatever the error.
	runWorker(t, ncDead, dead.start, &workqueue.WorkerOptions{Name: "dead"}, false)
	res := doAsync(t, c, workqueue.Item{ID: "x", Payload: []byte("p")})
	if id := recv(t, dead.got, "item at the first worker"); id != "x" {
		t.Fatalf("first worker got %q", id)
	}
	ncDead.Close()
	var calls counter
	worker(t, connect(), echo(&calls), &workqueue.WorkerOptions{Name: "alive"})
	o := recv(t, res, "result")
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.r.Worker != "alive" || string(o.r.Payload) != `"dies":p` || o.r.Deliveries < 2 {
		t.Errorf("result = %+v; want alive's, delivered at least twice", o.r)
	}
}

// TestLateResultRefused is the sharp edge an idempotent sink exists for:
// a worker that sends no heartbeat outlives AckWait, the item is
// delivered again and finished elsewhere, and the first worker's late
// result is refused: the item has one result, the first stored.
func TestLateResultRefused(t *testing.T) {
	connect := server(t)
	nc := connect()
	job := testJob("late")
	c := open(t, nc, job, &workqueue.Options{AckWait: time.Second})
	slow := newBlocker()
	var slowStats workqueue.Stats
	worker(t, connect(), slow.start, &workqueue.WorkerOptions{Name: "slow", Concurrency: 1, Heartbeat: -1, Stats: &slowStats})
	res := doAsync(t, c, workqueue.Item{ID: "x", Payload: []byte("p")})
	recv(t, slow.got, "item at the slow worker")
	var calls counter
	worker(t, connect(), echo(&calls), &workqueue.WorkerOptions{Name: "fast"})
	o := recv(t, res, "result")
	if o.err != nil || o.r.Worker != "fast" {
		t.Fatalf("result = %+v, %v; want fast's", o.r, o.err)
	}
	close(slow.release)
	refusedOnce(t, &slowStats)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(t.Context(), workqueue.ResultsBucket(job.ID))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(t.Context())
	if err != nil || len(keys) != 1 {
		t.Fatalf("results: keys %v, %v; want one", keys, err)
	}
	hist, err := kv.History(t.Context(), keys[0])
	if err != nil || len(hist) != 1 {
		t.Fatalf("result history: %d entries, %v; want 1", len(hist), err)
	}
	if r, _ := c.Do(t.Context(), workqueue.Item{ID: "x"}); r.Worker != "fast" {
		t.Errorf("stored result is %s's, want fast's", r.Worker)
	}
}

// refusedOnce waits until the slow worker of a late-result test tried to
// store its result, and checks it was refused.
func refusedOnce(t *testing.T, slowStats *workqueue.Stats) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for slowStats.Duplicate.Load() == 0 && slowStats.Done.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the slow worker never tried to store its result")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d, n := slowStats.Duplicate.Load(), slowStats.Done.Load(); d != 1 || n != 0 {
		t.Errorf("slow worker: %d refused, %d stored; want 1 refused, 0 stored", d, n)
	}
}

// TestResume: a coordinator stops (not finished) with results stored and
// an item still queued; a new coordinator of the same job gets the stored
// results without any work, and the queued item is not enqueued twice.
func TestResume(t *testing.T) {
	connect := server(t)
	var calls counter
	var stats workqueue.Stats
	stop := worker(t, connect(), echo(&calls), &workqueue.WorkerOptions{Name: "w1", Stats: &stats})
	nc := connect()
	// A short AckWait: w1 stops with a pull outstanding, and an item the
	// server hands to that pull comes back after AckWait.
	o := &workqueue.Options{AckWait: 2 * time.Second}
	first := open(t, nc, testJob("resume"), o)
	doAll(t, first, 5)
	stop()

	// Item 5 is enqueued while no worker runs; its coordinator goes away.
	pending := doAsync(t, first, workqueue.Item{ID: "item 5/x.y", Payload: []byte("5")})
	js, _ := jetstream.New(nc)
	deadline := time.Now().Add(hang)
	for {
		st, err := js.Stream(t.Context(), workqueue.JobStream(testJob("resume").ID))
		if err == nil && st.CachedInfo().State.Msgs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("item 5 never reached the stream")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, pending, "Do's end after Close"); !errors.Is(o.err, workqueue.ErrClosed) {
		t.Fatalf("Do after Close = %v, want ErrClosed", o.err)
	}

	second := open(t, connect(), testJob("resume"), o)
	var stats2 workqueue.Stats
	stop2 := worker(t, connect(), echo(&calls), &workqueue.WorkerOptions{Name: "w2", Stats: &stats2})
	got := doAll(t, second, 6)
	stop2() // its counts are final once it stopped
	wantPayloads, wantCounts := want("resume", 6)
	if d := cmp.Diff(wantPayloads, got); d != "" {
		t.Errorf("results (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantCounts, calls.get()); d != "" {
		t.Errorf("process calls per item over both runs (-want +got):\n%s", d)
	}
	if n := stats2.Skipped.Load(); n != 0 {
		t.Errorf("w2 was delivered %d items already done (enqueued twice)", n)
	}
	if n := stats2.Done.Load(); n != 1 {
		t.Errorf("w2 stored %d results, want 1 (item 5)", n)
	}
}

// TestFailedItem: an item whose Process fails on every delivery is stored
// as failed after MaxAttempts, and Do says so.
func TestFailedItem(t *testing.T) {
	connect := server(t)
	c := open(t, connect(), testJob("fails"), nil)
	fail := func(context.Context, workqueue.Job) (workqueue.Process, error) {
		return func(context.Context, workqueue.Item) ([]byte, error) { return nil, errors.New("no such thing") }, nil
	}
	worker(t, connect(), fail, &workqueue.WorkerOptions{Name: "w", MaxAttempts: 2})
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	defer cancel()
	r, err := c.Do(ctx, workqueue.Item{ID: "bad"})
	if !errors.Is(err, workqueue.ErrItemFailed) || r.Err != "no such thing" || r.Deliveries != 2 {
		t.Fatalf("Do = %+v, %v; want the failure stored on delivery 2", r, err)
	}
}

func TestJobID(t *testing.T) {
	a := workqueue.JobID("bench", []byte("x"), []byte("y"))
	if a != workqueue.JobID("bench", []byte("x"), []byte("y")) {
		t.Error("JobID is not deterministic")
	}
	for _, other := range []string{workqueue.JobID("bench", []byte("xy")), workqueue.JobID("bench", []byte("x"), []byte("z")), workqueue.JobID("rollout", []byte("x"), []byte("y"))} {
		if other == a {
			t.Errorf("JobID collides: %s", a)
		}
	}
	connect := server(t)
	if _, err := workqueue.Open(t.Context(), connect(), workqueue.Job{ID: "a.b", Kind: "k"}, nil); err == nil {
		t.Error("a job id with a dot was accepted")
	}
	if _, err := workqueue.Open(t.Context(), connect(), workqueue.Job{ID: a}, nil); err == nil {
		t.Error("a job without a kind was accepted")
	}
}

// TestForget: a forgotten result is gone, and the next Do runs the item
// again (a result the caller chose not to keep).
func TestForget(t *testing.T) {
	connect := server(t)
	var calls counter
	worker(t, connect(), echo(&calls), nil)
	c := open(t, connect(), testJob("forget"), nil)
	doAll(t, c, 1)
	if err := c.Forget(t.Context(), "item 0/x.y"); err != nil {
		t.Fatal(err)
	}
	if err := c.Forget(t.Context(), "never done"); err != nil {
		t.Errorf("forgetting an item without a result: %v", err)
	}
	doAll(t, c, 1)
	if n := calls.get()["item 0/x.y"]; n != 2 {
		t.Errorf("item processed %d times, want 2 (once more after Forget)", n)
	}
}

// TestItemThatStallsItsWorkers: an item whose every delivery ends without
// a result or an error (its workers die or go silent on it) is stored as
// failed once delivered more than MaxAttempts times, instead of going
// round for ever.
func TestItemThatStallsItsWorkers(t *testing.T) {
	connect := server(t)
	c := open(t, connect(), testJob("stalls"), &workqueue.Options{AckWait: time.Second})
	stall := newBlocker()
	worker(t, connect(), stall.start, &workqueue.WorkerOptions{Name: "w", Heartbeat: -1, MaxAttempts: 2})
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	defer cancel()
	r, err := c.Do(ctx, workqueue.Item{ID: "stuck"})
	if !errors.Is(err, workqueue.ErrItemFailed) || r.Deliveries != 3 || !strings.Contains(r.Err, "delivered 3 times") {
		t.Fatalf("Do = %+v, %v; want a failure stored on delivery 3", r, err)
	}
}
