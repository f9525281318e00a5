package workqueue_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/testkit/natstest"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// smallPayload is the max_payload of the servers of these tests: values
// several times larger stay small.
const smallPayload = 16 << 10

// smallServer starts a server taking messages of at most smallPayload
// bytes and returns a function opening connections to it.
func smallServer(t *testing.T) func() *nats.Conn {
	t.Helper()
	url := natstest.StartWith(t, &natstest.Options{MaxPayload: smallPayload})
	return func() *nats.Conn {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
}

// blob is n bytes that differ with seed and do not compress.
func blob(seed string, n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", seed, i))
		b.Write(sum[:])
	}
	return b.Bytes()[:n]
}

// sized is a Start whose Process checks the job's spec is want, and
// answers with a result of the size the item's payload names after its
// first line ("<size>\n<anything>"), counting.
func sized(c *counter, spec []byte) workqueue.Start {
	return func(_ context.Context, job workqueue.Job) (workqueue.Process, error) {
		if !bytes.Equal(job.Spec, spec) {
			return nil, fmt.Errorf("spec of %d bytes, want the %d sent", len(job.Spec), len(spec))
		}
		return func(_ context.Context, it workqueue.Item) ([]byte, error) {
			c.add(it.ID)
			var n int
			if _, err := fmt.Sscanf(string(it.Payload), "%d\n", &n); err != nil {
				return nil, err
			}
			return sizedResult(it.ID, it.Payload, n), nil
		}, nil
	}
}

// sizedResult is what sized answers: n bytes depending on the item.
func sizedResult(id string, payload []byte, n int) []byte {
	sum := sha256.Sum256(payload)
	return blob(id+string(sum[:]), n)
}

// sizedItem is an item whose payload has payloadSize bytes and asks
// for a result of resultSize.
func sizedItem(id string, payloadSize, resultSize int) workqueue.Item {
	head := fmt.Sprintf("%d\n", resultSize)
	return workqueue.Item{ID: id, Payload: append([]byte(head), blob(id, max(payloadSize-len(head), 0))...)}
}

// objectNames lists the job's objects (those finished, not deleted).
func objectNames(t *testing.T, js jetstream.JetStream, job string) []string {
	t.Helper()
	obs, err := js.ObjectStore(t.Context(), workqueue.ObjectsBucket(job))
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(t.Context())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
	}
	slices.Sort(names)
	return names
}

// prefixed counts names beginning with prefix.
func prefixed(names []string, prefix string) int {
	n := 0
	for _, s := range names {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// TestLargeValues: on a server whose messages hold 16 KiB, a job spec,
// items and results several times that go through the job's object
// store and arrive byte for byte; small ones stay inline. Each item is
// processed once; an item's object goes once its result is stored; a
// coordinator opened again (as after a kill) gets the large results
// without work; Forget removes a result's object; Finish the store.
func TestLargeValues(t *testing.T) {
	connect := smallServer(t)
	spec := []byte(`"` + strings.Repeat("s", 5*smallPayload) + `"`)
	job := workqueue.Job{ID: workqueue.JobID("test", spec), Kind: "test", Spec: spec}
	var calls counter
	stopA := worker(t, connect(), sized(&calls, spec), &workqueue.WorkerOptions{Name: "a", Concurrency: 3})
	stopB := worker(t, connect(), sized(&calls, spec), &workqueue.WorkerOptions{Name: "b", Concurrency: 2})
	nc := connect()
	items := []workqueue.Item{
		sizedItem("small", 10, 100),
		sizedItem("big result", 10, 5*smallPayload),
		sizedItem("big item", 4*smallPayload, 100),
		sizedItem("both", 3*smallPayload, 6*smallPayload+7),
		sizedItem("near the limit", smallPayload-100, smallPayload-100),
	}
	wantResults := map[string][]byte{}
	for _, it := range items {
		var n int
		fmt.Sscanf(string(it.Payload), "%d\n", &n)
		wantResults[it.ID] = sizedResult(it.ID, it.Payload, n)
	}
	run := func(c *workqueue.Coordinator) map[string][]byte {
		ctx, cancel := context.WithTimeout(t.Context(), hang)
		defer cancel()
		var mu sync.Mutex
		got := map[string][]byte{}
		var wg sync.WaitGroup
		for _, it := range items {
			wg.Go(func() {
				r, err := c.Do(ctx, it)
				if err != nil {
					t.Errorf("Do(%s): %v", it.ID, err)
					return
				}
				mu.Lock()
				got[it.ID] = r.Payload
				mu.Unlock()
			})
		}
		wg.Wait()
		return got
	}
	c := open(t, nc, job, nil)
	if d := cmp.Diff(wantResults, run(c)); d != "" {
		t.Fatalf("results (-want +got):\n%s", d)
	}
	wantCalls := map[string]int{}
	for _, it := range items {
		wantCalls[it.ID] = 1
	}
	if d := cmp.Diff(wantCalls, calls.get()); d != "" {
		t.Errorf("process calls per item (-want +got):\n%s", d)
	}
	// A worker deletes an item's object after storing its result: once
	// stopped, the workers did all they will.
	stopA()
	stopB()
	js, _ := jetstream.New(nc)
	names := objectNames(t, js, job.ID)
	// The two large results and the spec stay; the items' objects went
	// with their results ("near the limit" is a large result once
	// encoded).
	if r, s, i := prefixed(names, "result/"), prefixed(names, "spec/"), prefixed(names, "item/"); r != 3 || s != 1 || i != 0 {
		t.Errorf("objects %q: %d results, %d specs, %d items; want 3, 1, 0", names, r, s, i)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	again := open(t, connect(), job, nil)
	if d := cmp.Diff(wantResults, run(again)); d != "" {
		t.Fatalf("results of a coordinator opened again (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantCalls, calls.get()); d != "" {
		t.Errorf("process calls per item after opening again (-want +got):\n%s", d)
	}
	if err := again.Forget(t.Context(), "both"); err != nil {
		t.Fatal(err)
	}
	if n := prefixed(objectNames(t, js, job.ID), "result/"); n != 2 {
		t.Errorf("%d result objects after forgetting one of 3", n)
	}
	if err := again.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := js.ObjectStore(t.Context(), workqueue.ObjectsBucket(job.ID)); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("object store after Finish: %v, want ErrBucketNotFound", err)
	}
}

// TestResultOverStockMaxPayload: on a server with NATS's default
// max_payload (1 MiB), a 2 MiB result arrives whole.
func TestResultOverStockMaxPayload(t *testing.T) {
	nc, err := nats.Connect(natstest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var calls counter
	worker(t, nc, sized(&calls, []byte(`"big"`)), &workqueue.WorkerOptions{Name: "w"})
	c := open(t, nc, testJob("big"), nil)
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	defer cancel()
	it := sizedItem("x", 10, 2<<20)
	r, err := c.Do(ctx, it)
	if err != nil {
		t.Fatal(err)
	}
	if want := sizedResult("x", it.Payload, 2<<20); !bytes.Equal(r.Payload, want) {
		t.Errorf("result of %d bytes differs from the %d-byte one sent", len(r.Payload), len(want))
	}
}

// largeBlocker is blocker's Process with a large result: it reports the
// item and waits for release.
func (b *blocker) startLarge(size int) workqueue.Start {
	return func(context.Context, workqueue.Job) (workqueue.Process, error) {
		return func(ctx context.Context, it workqueue.Item) ([]byte, error) {
			b.got <- it.ID
			select {
			case <-b.release:
				return blob("late", size), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}, nil
	}
}

// TestLateLargeResultRefused: a worker without heartbeats outlives
// AckWait with a large result; the item is finished elsewhere; the late
// result is refused and the object it uploaded removed, so one result
// object stays: the winner's.
func TestLateLargeResultRefused(t *testing.T) {
	connect := smallServer(t)
	nc := connect()
	job := testJob("late large")
	c := open(t, nc, job, &workqueue.Options{AckWait: time.Second})
	slow := newBlocker()
	var slowStats workqueue.Stats
	stopSlow := worker(t, connect(), slow.startLarge(4*smallPayload), &workqueue.WorkerOptions{Name: "slow", Concurrency: 1, Heartbeat: -1, Stats: &slowStats})
	it := sizedItem("x", 10, 3*smallPayload)
	res := doAsync(t, c, it)
	recv(t, slow.got, "item at the slow worker")
	var calls counter
	stopFast := worker(t, connect(), sized(&calls, job.Spec), &workqueue.WorkerOptions{Name: "fast"})
	o := recv(t, res, "result")
	if o.err != nil || o.r.Worker != "fast" || !bytes.Equal(o.r.Payload, sizedResult("x", it.Payload, 3*smallPayload)) {
		t.Fatalf("result = %s's %d bytes, %v; want fast's", o.r.Worker, len(o.r.Payload), o.err)
	}
	close(slow.release)
	refusedOnce(t, &slowStats)
	// Stopped, the workers are done with every delivery (fast may have
	// got the item once more if a heartbeat came late on a loaded
	// machine; its refused result's object is gone by then too).
	stopSlow()
	stopFast()
	js, _ := jetstream.New(nc)
	if names := objectNames(t, js, job.ID); prefixed(names, "result/") != 1 {
		t.Errorf("result objects %q; want only the stored result's", names)
	}
	if r, err := c.Do(t.Context(), workqueue.Item{ID: "x"}); err != nil || r.Worker != "fast" {
		t.Errorf("stored result: %s's, %v; want fast's", r.Worker, err)
	}
}

// stallingReader reads its data in full on the first Read, then reports
// on mid and blocks until release: an upload stopped after its first
// chunk.
type stallingReader struct {
	data    []byte
	reads   int
	mid     chan<- struct{}
	release <-chan struct{}
}

func (r *stallingReader) Read(p []byte) (int, error) {
	r.reads++
	if r.reads == 2 {
		r.mid <- struct{}{}
		<-r.release
		return 0, errors.New("upload stopped by the test")
	}
	if r.reads > 2 {
		return 0, io.EOF
	}
	return copy(p, r.data), nil
}

// TestWorkerKilledMidUpload: a worker's connection goes (as when its
// process is killed) half way through uploading a large result. Its
// partial object is no object: no result refers to it and the job's
// store lists none. The item is delivered again after AckWait and the
// other worker's result arrives byte for byte.
func TestWorkerKilledMidUpload(t *testing.T) {
	connect := smallServer(t)
	nc := connect()
	job := testJob("mid upload")
	c := open(t, nc, job, &workqueue.Options{AckWait: time.Second})
	mid, release := make(chan struct{}, 1), make(chan struct{})
	o := &workqueue.WorkerOptions{Name: "killed", Concurrency: 1}
	workqueue.SetUpload(o, func(data []byte) io.Reader {
		return &stallingReader{data: data, mid: mid, release: release}
	})
	ncKilled := connect()
	var killedCalls counter
	runWorker(t, ncKilled, sized(&killedCalls, job.Spec), o, false)
	t.Cleanup(func() { close(release) }) // runs before the worker's stop
	it := sizedItem("x", 10, 5*smallPayload)
	res := doAsync(t, c, it)
	recv(t, mid, "upload half way")
	ncKilled.Close()

	js, _ := jetstream.New(nc)
	if names := objectNames(t, js, job.ID); len(names) != 0 {
		t.Errorf("objects while the upload is cut short: %q, want none", names)
	}
	var calls counter
	stopAlive := worker(t, connect(), sized(&calls, job.Spec), &workqueue.WorkerOptions{Name: "alive"})
	out := recv(t, res, "result")
	if out.err != nil {
		t.Fatal(out.err)
	}
	if out.r.Worker != "alive" || out.r.Deliveries < 2 || !bytes.Equal(out.r.Payload, sizedResult("x", it.Payload, 5*smallPayload)) {
		t.Errorf("result = %s's %d bytes on delivery %d; want alive's, on a later delivery, byte for byte", out.r.Worker, len(out.r.Payload), out.r.Deliveries)
	}
	stopAlive() // done with every delivery, a late second one included
	if names := objectNames(t, js, job.ID); len(names) != 1 {
		t.Errorf("objects %q; want the one stored result's", names)
	}
}

// TestUnreadableResultObject: a stored result whose object is gone, or
// was replaced by other bytes, is dropped and its item done again.
func TestUnreadableResultObject(t *testing.T) {
	connect := smallServer(t)
	nc := connect()
	job := testJob("unreadable")
	var calls counter
	worker(t, nc, sized(&calls, job.Spec), &workqueue.WorkerOptions{Name: "w"})
	c := open(t, nc, job, nil)
	js, _ := jetstream.New(nc)
	obs, err := js.ObjectStore(t.Context(), workqueue.ObjectsBucket(job.ID))
	if err != nil {
		t.Fatal(err)
	}
	it := sizedItem("x", 10, 3*smallPayload)
	want := sizedResult("x", it.Payload, 3*smallPayload)
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	defer cancel()
	for n, spoil := range []func(name string) error{
		func(name string) error { return obs.Delete(ctx, name) },
		func(name string) error {
			_, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: smallPayload / 2}},
				bytes.NewReader(blob("other", 3*smallPayload)))
			return err
		},
	} {
		r, err := c.Do(ctx, it)
		if err != nil || !bytes.Equal(r.Payload, want) {
			t.Fatalf("round %d: Do = %d bytes, %v; want the result", n, len(r.Payload), err)
		}
		names := objectNames(t, js, job.ID)
		if len(names) != 1 {
			t.Fatalf("round %d: objects %q, want one", n, names)
		}
		if err := spoil(names[0]); err != nil {
			t.Fatal(err)
		}
		if r, err := c.Do(ctx, it); err != nil || !bytes.Equal(r.Payload, want) {
			t.Fatalf("round %d: Do after the object was spoilt = %d bytes, %v; want the result done again", n, len(r.Payload), err)
		}
		// Each round does the item once, and once more after the spoiling.
		if got := calls.get()["x"]; got != 2*n+2 {
			t.Fatalf("round %d: item processed %d times, want %d", n, got, 2*n+2)
		}
		if err := c.Forget(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	}
}

// failingReader fails every read: an upload that cannot be done.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

// TestUploadFailsEveryTime: a large result whose upload fails on every
// delivery is stored as a failure naming why after MaxAttempts, instead
// of the item going round for ever.
func TestUploadFailsEveryTime(t *testing.T) {
	connect := smallServer(t)
	job := testJob("upload fails")
	c := open(t, connect(), job, nil)
	o := &workqueue.WorkerOptions{Name: "w", MaxAttempts: 2}
	workqueue.SetUpload(o, func([]byte) io.Reader { return failingReader{} })
	var calls counter
	worker(t, connect(), sized(&calls, job.Spec), o)
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	defer cancel()
	r, err := c.Do(ctx, sizedItem("x", 10, 3*smallPayload))
	if !errors.Is(err, workqueue.ErrItemFailed) || r.Deliveries != 2 || !strings.Contains(r.Err, "disk on fire") {
		t.Fatalf("Do = %+v, %v; want the upload's failure stored on delivery 2", r.Err, err)
	}
	if n := calls.get()["x"]; n != 2 {
		t.Errorf("item processed %d times, want 2", n)
	}
}
