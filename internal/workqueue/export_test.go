package workqueue

import (
	"context"
	"io"

	"github.com/nats-io/nats.go/jetstream"
)

// SetUpload makes the worker's result uploads read what f returns for
// the result's bytes (a test stops an upload half way with it).
func SetUpload(o *WorkerOptions, f func(data []byte) io.Reader) { o.upload = f }

// OpenJobs is openJobs, the jobs bucket as workers (replicas 1) and
// coordinators open it.
func OpenJobs(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.KeyValue, error) {
	return openJobs(ctx, js, bucket, replicas)
}
