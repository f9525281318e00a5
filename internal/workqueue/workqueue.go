// Package workqueue runs one job's items on many worker processes through
// NATS JetStream, with each item's result kept exactly once.
//
// A job has an id that the caller derives from the settings that pin its
// results ([JobID]), so a coordinator restarted after a kill opens the
// same job again and finds what was done meanwhile. Per job there is:
//
//   - a work-queue stream (JobStream) with one subject per item, holding
//     at most one message per subject: enqueuing an item that is still
//     waiting or being worked on is refused by the server, so a restarted
//     coordinator never puts an item in twice;
//   - one durable pull consumer all workers share, with explicit acks and
//     an AckWait: an item whose worker died (no ack, no in-progress
//     heartbeat) is delivered again once AckWait has passed;
//   - a key-value bucket of results (ResultsBucket), written with Create
//     keyed by item: the first result stored wins and every later one is
//     refused. Delivery alone cannot give exactly-once results (an ack that
//     arrives after AckWait can still be accepted while the item is being
//     worked on elsewhere), an idempotent sink can;
//   - an entry of the jobs bucket (DefaultJobsBucket) describing the job:
//     its kind (which workers serve it) and a spec, the settings a worker
//     needs. Secrets never go there: workers read them from their own
//     environment;
//   - an object store (ObjectsBucket) for values too large for one NATS
//     message (the server's max_payload, 1 MiB on a stock server): a
//     spec, item or result over the inline limit is stored there in
//     chunks, and its message or key holds a reference (name, size,
//     SHA-256) that the reader checks. A result's reference is what the
//     worker Creates, after its upload: a partial upload is never
//     referred to, a refused result's object is deleted, and a reference
//     whose object is gone or damaged is dropped and its item done
//     again. Small values stay inline, with no extra round trip.
//
// A [Coordinator] opens a job and runs its items with [Coordinator.Do],
// which returns an item's stored result, or enqueues the item and waits
// for it; [Coordinator.Finish] removes the job once the caller has kept
// every result. [Work] is the worker side: it watches the jobs bucket,
// serves every job of its kind, pulls one item per free slot, tells the
// server it is still working while a long item runs, stores the result and
// acknowledges it. A worker never works on an item whose result is
// already stored.
package workqueue

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Defaults of [Options] and [WorkerOptions].
const (
	// DefaultJobsBucket is the key-value bucket of job descriptions.
	DefaultJobsBucket = "agentworld_jobs"
	// DefaultAckWait is how long an item may go without an ack or an
	// in-progress heartbeat before it is delivered to another worker.
	DefaultAckWait = 30 * time.Second
	// DefaultPollInterval is how often a waiting [Coordinator.Do] reads
	// its item's result directly, besides watching for it.
	DefaultPollInterval = 30 * time.Second
	// DefaultSetupTimeout bounds the wait for JetStream to answer when a
	// job is opened (a forming cluster answers "not available" a while).
	DefaultSetupTimeout = time.Minute
	// DefaultConcurrency is how many items a worker works on at once.
	DefaultConcurrency = 4
	// DefaultMaxAttempts is how many deliveries of an item a worker
	// tries before it stores a failed result for it.
	DefaultMaxAttempts = 5
	// DefaultFetchWait is how long one pull for an item waits.
	DefaultFetchWait = 5 * time.Second
)

// consumerName is the durable consumer every worker of a job pulls from.
const consumerName = "workers"

// ErrItemFailed wraps the error of an item no worker could process
// ([Result.Err]).
var ErrItemFailed = errors.New("work item failed")

// ErrClosed is returned by [Coordinator.Do] once the coordinator is closed.
var ErrClosed = errors.New("work queue coordinator closed")

// Job describes a job to its workers.
type Job struct {
	// ID names the job (letters, digits, '-' and '_', at most 64); see
	// [JobID].
	ID string `json:"id"`
	// Kind says which workers serve the job ("bench", "rollout", …).
	Kind string `json:"kind"`
	// Spec is what a worker needs to process the items (settings, model
	// URLs, templates), as JSON; never secrets.
	Spec json.RawMessage `json:"spec,omitempty"`
}

// Dispatcher hands items to workers and takes their results back, as a
// [Coordinator] does; a caller takes one to be testable without a NATS
// server (package workqueuetest has an in-process one).
type Dispatcher interface {
	// Do runs an item and returns its result ([Coordinator.Do]).
	Do(ctx context.Context, it Item) (Result, error)
	// Forget drops an item's stored result ([Coordinator.Forget]).
	Forget(ctx context.Context, id string) error
}

var _ Dispatcher = (*Coordinator)(nil)

// Item is one unit of work.
type Item struct {
	// ID identifies the item within its job; any non-empty string.
	ID string
	// Payload is what the worker needs of this item.
	Payload []byte
}

// Result is an item's stored outcome.
type Result struct {
	// ID is the item's.
	ID string
	// Payload is what the worker's handler returned, whatever its size.
	Payload []byte
	// Err is set instead when the item failed on every attempt.
	Err string
	// Worker names the worker that stored the result; Deliveries is how
	// many times the item had been delivered then.
	Worker     string
	Deliveries uint64
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// JobID derives a job id from kind and the parts that pin the job's
// results (settings, the input's identity): the same parts give the same
// id, so a restarted coordinator resumes its job.
func JobID(kind string, parts ...[]byte) string {
	h := sha256.New()
	h.Write([]byte(kind))
	for _, p := range parts {
		fmt.Fprintf(h, "\x00%d\x00", len(p))
		h.Write(p)
	}
	return kind + "-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// JobStream is the name of a job's work-queue stream.
func JobStream(job string) string { return "AGENTWORLD_WQ_" + job }

// ResultsBucket is the name of a job's results bucket.
func ResultsBucket(job string) string { return "agentworld_wq_" + job }

// subjectPrefix begins every item subject of a job.
func subjectPrefix(job string) string { return "agentworld.wq." + job + "." }

// itemKey is an item id as one subject token and bucket key.
func itemKey(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

// itemID decodes an item key.
func itemID(key string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(key)
	return string(b), err
}

func checkJob(j Job) error {
	if !idRE.MatchString(j.ID) {
		return fmt.Errorf("work queue: job id %q: want 1-64 letters, digits, '-' or '_'", j.ID)
	}
	if j.Kind == "" {
		return errors.New("work queue: job " + j.ID + " has no kind")
	}
	return nil
}

// storedResult is the wire form of a [Result] in the results bucket: its
// payload inline, or in the job's object store when it is too large for
// one message.
type storedResult struct {
	ID         string     `json:"id"`
	Payload    []byte     `json:"payload,omitempty"`
	Object     *objectRef `json:"object,omitempty"`
	Err        string     `json:"error,omitempty"`
	Worker     string     `json:"worker"`
	Deliveries uint64     `json:"deliveries"`
}

// toStored is r's wire form, its payload inline.
func toStored(r Result) storedResult {
	return storedResult{ID: r.ID, Payload: r.Payload, Err: r.Err, Worker: r.Worker, Deliveries: r.Deliveries}
}

// result is s as a Result, its payload (when inline) included.
func (s storedResult) result() Result {
	return Result{ID: s.ID, Payload: s.Payload, Err: s.Err, Worker: s.Worker, Deliveries: s.Deliveries}
}

// decodeResult reads a stored result.
func decodeResult(b []byte) (storedResult, error) {
	var r storedResult
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("work queue: stored result: %w", err)
	}
	if r.Object != nil {
		if len(r.Payload) > 0 || r.Err != "" {
			return r, fmt.Errorf("work queue: stored result of %s: an object reference besides an inline payload or error", r.ID)
		}
		if err := r.Object.check(); err != nil {
			return r, fmt.Errorf("work queue: stored result of %s: %w", r.ID, err)
		}
	}
	return r, nil
}

// jobDesc is the wire form of a [Job] in the jobs bucket: its spec
// inline, or in the job's object store when it is too large for one
// message.
type jobDesc struct {
	ID         string          `json:"id"`
	Kind       string          `json:"kind"`
	Spec       json.RawMessage `json:"spec,omitempty"`
	SpecObject *objectRef      `json:"spec_object,omitempty"`
}

// decodeJob reads a job description.
func decodeJob(b []byte) (jobDesc, error) {
	var d jobDesc
	if err := json.Unmarshal(b, &d); err != nil {
		return d, err
	}
	if d.SpecObject != nil {
		if len(d.Spec) > 0 {
			return d, fmt.Errorf("job %s: a spec object besides an inline spec", d.ID)
		}
		if err := d.SpecObject.check(); err != nil {
			return d, fmt.Errorf("job %s: %w", d.ID, err)
		}
	}
	return d, nil
}

// failed is r's error, when r is a failure.
func (r Result) failed() error {
	if r.Err == "" {
		return nil
	}
	return fmt.Errorf("%w: item %s: %s", ErrItemFailed, r.ID, r.Err)
}
