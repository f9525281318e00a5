package workqueue_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentworld/agentworld/internal/testkit/natstest"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// BenchmarkResultSize: one item at a time through a job on a stock
// server (1 MiB max_payload, every write synced), its result inline
// (1 KiB, 256 KiB) or through the object store (256 KiB over a 16 KiB
// inline limit, 4 MiB over the default): the cost per item and per
// result byte.
func BenchmarkResultSize(b *testing.B) {
	url := natstest.Start(b)
	for _, c := range []struct {
		name   string
		size   int
		inline int
	}{
		{"inline_1KiB", 1 << 10, 0},
		{"inline_256KiB", 256 << 10, 0},
		{"object_256KiB", 256 << 10, 16 << 10},
		{"object_4MiB", 4 << 20, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			nc, err := nats.Connect(url)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			var calls counter
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			spec := []byte(`"` + c.name + `"`)
			go func() {
				_ = workqueue.Work(ctx, nc, "test", sized(&calls, spec), &workqueue.WorkerOptions{Name: "w", Concurrency: 1, InlineLimit: c.inline})
			}()
			coord, err := workqueue.Open(ctx, nc, workqueue.Job{ID: workqueue.JobID("test", spec), Kind: "test", Spec: spec}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = coord.Finish(context.Background()) }()
			b.SetBytes(int64(c.size))
			b.ResetTimer()
			for i := range b.N {
				r, err := coord.Do(ctx, sizedItem(fmt.Sprint(i), 10, c.size))
				if err != nil || len(r.Payload) != c.size {
					b.Fatalf("Do: %d bytes, %v", len(r.Payload), err)
				}
			}
		})
	}
}
