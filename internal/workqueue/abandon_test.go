package workqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/workqueue"
)

// TestAbandon: a coordinator abandoned before it queued any item removes
// its job (stream, results, description), so no worker serves it for
// ever; one abandoned after it queued an item keeps the job, for a rerun
// to resume.
func TestAbandon(t *testing.T) {
	connect := server(t)
	nc := connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	jobs := func() jetstream.KeyValue {
		kv, err := js.KeyValue(ctx, workqueue.DefaultJobsBucket)
		if err != nil {
			t.Fatal(err)
		}
		return kv
	}

	unused := workqueue.Job{ID: "unused", Kind: "k", Spec: []byte(`"spec"`)}
	removed, err := open(t, nc, unused, nil).Abandon(ctx)
	if err != nil || !removed {
		t.Fatalf("Abandon of a job with nothing queued = %v, %v; want true, nil", removed, err)
	}
	if _, err := js.Stream(ctx, workqueue.JobStream(unused.ID)); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream after Abandon: %v, want ErrStreamNotFound", err)
	}
	if _, err := js.KeyValue(ctx, workqueue.ResultsBucket(unused.ID)); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("results bucket after Abandon: %v, want ErrBucketNotFound", err)
	}
	if _, err := jobs().Get(ctx, unused.ID); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("job description after Abandon: %v, want ErrKeyNotFound", err)
	}

	used := workqueue.Job{ID: "used", Kind: "k", Spec: []byte(`"spec"`)}
	c := open(t, nc, used, nil)
	doCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // no worker: it waits until cancelled
		defer close(done)
		_, _ = c.Do(doCtx, workqueue.Item{ID: "i1", Payload: []byte("x")})
	}()
	for deadline := time.Now().Add(hang); ; time.Sleep(10 * time.Millisecond) {
		st, err := js.Stream(ctx, workqueue.JobStream(used.ID))
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the item was never queued")
		}
	}
	cancel()
	<-done
	removed, err = c.Abandon(ctx)
	if err != nil || removed {
		t.Fatalf("Abandon of a job with an item queued = %v, %v; want false, nil", removed, err)
	}
	if _, err := js.Stream(ctx, workqueue.JobStream(used.ID)); err != nil {
		t.Errorf("stream after Abandon of a used job: %v", err)
	}
	if _, err := jobs().Get(ctx, used.ID); err != nil {
		t.Errorf("job description after Abandon of a used job: %v", err)
	}
}

// TestAbandonKeepsAJobOpenedAgain: coordinator A opens a job, B opens the
// same job (the same command run again) and has not queued anything yet
// when A fails and abandons. The job is B's too now: A's Abandon leaves
// it, and B's items are done and its Finish removes it.
func TestAbandonKeepsAJobOpenedAgain(t *testing.T) {
	connect := server(t)
	job := testJob("opened again")
	a := open(t, connect(), job, nil)
	b := open(t, connect(), job, nil)
	removed, err := a.Abandon(t.Context())
	if err != nil || removed {
		t.Fatalf("A's Abandon after B opened the job = %v, %v; want false, nil", removed, err)
	}
	nc := connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := js.KeyValue(t.Context(), workqueue.DefaultJobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Get(t.Context(), job.ID); err != nil {
		t.Fatalf("job description after A's Abandon: %v", err)
	}
	var calls counter
	worker(t, nc, echo(&calls), &workqueue.WorkerOptions{Name: "w", Concurrency: 2})
	got := doAll(t, b, 5)
	wantPayloads, _ := want("opened again", 5)
	if d := cmp.Diff(wantPayloads, got); d != "" {
		t.Errorf("B's results (-want +got):\n%s", d)
	}
	if err := b.Finish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(t.Context(), workqueue.JobStream(job.ID)); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream after B's Finish: %v, want ErrStreamNotFound", err)
	}
}
