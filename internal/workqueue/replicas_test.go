package workqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/natsconn"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// TestJobsBucketReplicasRaised: a worker that reaches a fresh cluster
// before any coordinator makes the jobs bucket with one replica; the
// coordinator of a replicated queue raises it to its own count, and a
// later worker does not lower it.
func TestJobsBucketReplicasRaised(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-server NATS cluster")
	}
	urls := natstest.StartCluster(t, 3, nil)
	nc, err := nats.Connect(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	replicas := func(want int) {
		t.Helper()
		var got int
		err := natsconn.RetryGrowing(ctx, func(ctx context.Context) error {
			info, err := js.Stream(ctx, "KV_jobs")
			if err == nil {
				got = info.CachedInfo().Config.Replicas
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("jobs bucket has %d replicas, want %d", got, want)
		}
	}
	open := func(n int) {
		t.Helper()
		err := natsconn.RetryGrowing(ctx, func(ctx context.Context) error {
			_, err := workqueue.OpenJobs(ctx, js, "jobs", n)
			return err
		})
		if err != nil {
			t.Fatalf("open the jobs bucket with %d replicas: %v", n, err)
		}
	}
	open(1) // a worker first
	replicas(1)
	open(3) // the coordinator of an R3 queue
	replicas(3)
	open(1) // another worker
	replicas(3)
}
