package workqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/natsconn"
)

// Process does one item of a job and returns its result payload. An
// error means the item could not be done here (it is delivered again, to
// this worker or another, up to WorkerOptions.MaxAttempts deliveries, and
// then stored as failed); an outcome the caller records, a failed sample
// included, is a payload. It is called concurrently and must stop soon
// once ctx ends.
type Process func(ctx context.Context, it Item) ([]byte, error)

// Start prepares a worker for a job from its description, once per job
// the worker serves. An error leaves the job to other workers; it is
// logged.
type Start func(ctx context.Context, job Job) (Process, error)

// WorkerOptions configure [Work]. Nil means every default.
type WorkerOptions struct {
	// Name names the worker in the results it stores and its log; ""
	// means host name and process id.
	Name string
	// Concurrency is how many items the worker works on at once, over
	// all its jobs; 0 means DefaultConcurrency.
	Concurrency int
	// Heartbeat is how often the worker tells the server an item is
	// still being worked on; 0 means a third of the job's AckWait, and a
	// negative value sends none (so a slow item is delivered again
	// after AckWait: tests of redelivery use it).
	Heartbeat time.Duration
	// MaxAttempts is the delivery of an item after which a Process error
	// is stored as the item's failed result, and beyond which the item
	// is not processed at all but stored as failed (its workers died or
	// went silent on it every time); 0 means DefaultMaxAttempts.
	MaxAttempts int
	// FetchWait is how long one pull for an item waits; 0 means
	// DefaultFetchWait.
	FetchWait time.Duration
	// JobsBucket names the bucket of job descriptions; "" means
	// DefaultJobsBucket.
	JobsBucket string
	// SetupTimeout bounds the wait for JetStream at start; 0 means
	// DefaultSetupTimeout.
	SetupTimeout time.Duration
	// InlineLimit is the largest result stored in one message; a larger
	// one goes through the job's object store. 0 means
	// DefaultInlineLimit; the server's max_payload lowers it.
	InlineLimit int
	// Logger receives what the worker does; nil discards it.
	Logger *slog.Logger
	// Stats, when set, is updated as items are done.
	Stats *Stats

	// upload, when set, gives the reader a result object's upload reads
	// (tests stop an upload half way with it).
	upload func(data []byte) io.Reader
}

// Stats count what a worker did.
type Stats struct {
	// Done counts results stored; Duplicate counts results refused
	// because the item already had one (a redelivered item finished
	// twice); Skipped counts deliveries of items already done, dropped
	// without work; Failed counts Process errors.
	Done, Duplicate, Skipped, Failed atomic.Int64
}

// worker is one run of [Work].
type worker struct {
	o      WorkerOptions
	log    *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	kind   string
	start  Start
	slots  chan struct{}
	stats  *Stats
	inline int // the largest result stored in one message
	wg     sync.WaitGroup
}

// Work serves every job of kind (those opened now and later) on nc until
// ctx ends, with start preparing each job; then it waits for the items in
// hand (their Process sees ctx end; an unfinished item is handed back at
// once) and returns ctx's error. It fails early when JetStream cannot be
// reached within SetupTimeout.
func Work(ctx context.Context, nc *nats.Conn, kind string, start Start, opts *WorkerOptions) error {
	var o WorkerOptions
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		host, _ := os.Hostname()
		o.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.FetchWait <= 0 {
		o.FetchWait = DefaultFetchWait
	}
	if o.JobsBucket == "" {
		o.JobsBucket = DefaultJobsBucket
	}
	if o.SetupTimeout == 0 {
		o.SetupTimeout = DefaultSetupTimeout
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stats := o.Stats
	if stats == nil {
		stats = &Stats{}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	w := &worker{o: o, log: log.With("worker", o.Name), nc: nc, js: js, kind: kind, start: start,
		slots: make(chan struct{}, o.Concurrency), stats: stats, inline: inlineLimit(nc, o.InlineLimit)}
	var jobs jetstream.KeyValue
	setup, cancel := context.WithTimeout(ctx, o.SetupTimeout)
	// workers starting together may all create the bucket at once
	err = natsconn.RetryGrowing(setup, func(ctx context.Context) (err error) {
		jobs, err = openJobs(ctx, js, o.JobsBucket, 1)
		return err
	})
	cancel()
	if err != nil {
		return fmt.Errorf("work queue: open the jobs bucket %s: %w", o.JobsBucket, err)
	}
	watch, err := jobs.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("work queue: watch the jobs bucket %s: %w", o.JobsBucket, err)
	}
	defer func() { _ = watch.Stop() }()
	running := map[string]context.CancelFunc{}
	defer func() {
		for _, stop := range running {
			stop()
		}
		w.wg.Wait()
	}()
	w.log.Info("worker ready", "kind", kind, "concurrency", o.Concurrency)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-watch.Updates():
			if !ok {
				return fmt.Errorf("work queue: the watch of %s ended", o.JobsBucket)
			}
			if e == nil {
				continue // the end of the jobs open at start
			}
			id := e.Key()
			if e.Operation() != jetstream.KeyValuePut {
				if stop, ok := running[id]; ok {
					stop()
					delete(running, id)
					w.log.Info("job removed", "job", id)
				}
				continue
			}
			if _, ok := running[id]; ok {
				continue
			}
			job, err := decodeJob(e.Value())
			if err != nil {
				w.log.Warn("unreadable job description", "job", id, "error", err)
				continue
			}
			if job.Kind != kind || job.ID != id {
				continue
			}
			jctx, stop := context.WithCancel(ctx)
			running[id] = stop
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				w.serve(jctx, job)
			}()
		}
	}
}

// jobQueue is what a worker uses of one job.
type jobQueue struct {
	job     string
	log     *slog.Logger
	results jetstream.KeyValue
	objects jetstream.ObjectStore
	process Process
	beat    time.Duration
}

// serve pulls one job's items while ctx lasts, one per free slot.
func (w *worker) serve(ctx context.Context, d jobDesc) {
	q := &jobQueue{job: d.ID, log: w.log.With("job", d.ID)}
	log := q.log
	var cons jetstream.Consumer
	job := Job{ID: d.ID, Kind: d.Kind, Spec: d.Spec}
	if err := natsconn.Retry(ctx, 10*time.Second, func(ctx context.Context) (err error) {
		if cons, err = w.js.Consumer(ctx, JobStream(d.ID), consumerName); err != nil {
			return err
		}
		if q.results, err = w.js.KeyValue(ctx, ResultsBucket(d.ID)); err != nil {
			return err
		}
		q.objects, err = w.js.ObjectStore(ctx, ObjectsBucket(d.ID))
		return err
	}); err != nil {
		if ctx.Err() == nil {
			log.Error("cannot open the job's queue", "error", err)
		}
		return
	}
	if d.SpecObject != nil {
		// Read again while the server fails to answer; an object that is
		// gone or not the one referred to will not come back.
		var spec []byte
		var err error
		_ = natsconn.Retry(ctx, readTimeout(d.SpecObject.Size), func(ctx context.Context) error {
			spec, err = getObject(ctx, q.objects, *d.SpecObject)
			if errors.Is(err, errBadObject) {
				return nil
			}
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				log.Error("cannot read the job's spec; left to other workers", "error", err)
			}
			return
		}
		job.Spec = spec
	}
	process, err := w.start(ctx, job)
	if err != nil {
		log.Error("cannot serve the job; left to other workers", "error", err)
		return
	}
	q.process, q.beat = process, w.o.Heartbeat
	if q.beat == 0 {
		q.beat = cons.CachedInfo().Config.AckWait / 3
	}
	log.Info("serving job")
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case w.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		msg, err := w.next(ctx, cons)
		if err != nil || msg == nil {
			<-w.slots
			if err != nil && ctx.Err() == nil {
				log.Warn("pull failed; retrying", "error", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-w.slots }()
			w.handle(ctx, q, msg)
		}()
	}
}

// next pulls one item; nil when none came within FetchWait. The server
// gives up on the pull a little before this stops reading it, so no item
// goes to a pull no longer read; only one delivered just as ctx ends
// can be, and it comes back after AckWait.
func (w *worker) next(ctx context.Context, cons jetstream.Consumer) (jetstream.Msg, error) {
	fctx, cancel := context.WithTimeout(ctx, w.o.FetchWait)
	defer cancel()
	batch, err := cons.Fetch(1, jetstream.FetchContext(fctx))
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, err
	}
	var msg jetstream.Msg
	for m := range batch.Messages() {
		msg = m
	}
	if err := batch.Error(); err != nil && msg == nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, err
	}
	return msg, nil
}

// handle works on one delivered item: skip it when done, else process it
// with heartbeats, store its result with Create and acknowledge it.
func (w *worker) handle(ctx context.Context, q *jobQueue, msg jetstream.Msg) {
	log, results := q.log, q.results
	subj := msg.Subject()
	key := subj[strings.LastIndexByte(subj, '.')+1:]
	id, err := itemID(key)
	if err != nil {
		log.Error("item subject is not an encoded id; dropped", "subject", subj)
		_ = msg.Term()
		return
	}
	log = log.With("item", id)
	var delivered uint64 = 1
	if meta, err := msg.Metadata(); err == nil {
		delivered = meta.NumDelivered
	}
	if _, err := results.Get(ctx, key); err == nil {
		// Done before (by a worker whose ack was lost): never again.
		w.stats.Skipped.Add(1)
		log.Debug("item already has a result; acknowledged without work")
		_ = msg.Ack()
		return
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		log.Warn("cannot read the item's result; handed back", "error", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}

	if delivered > uint64(w.o.MaxAttempts) {
		// Every earlier delivery ended without a result or an error: the
		// item kills or stalls its workers. Stored as failed, it stops
		// going round.
		w.stats.Failed.Add(1)
		log.Error("item delivered too often without a result; storing the failure", "delivery", delivered)
		r := Result{ID: id, Worker: w.o.Name, Deliveries: delivered,
			Err: fmt.Sprintf("delivered %d times and never finished: its workers died or stopped reporting on it each time", delivered)}
		if val, ok := w.encode(context.Background(), q, log, key, msg, r); ok {
			w.commit(q, log, key, msg, val, itemObject(msg))
		}
		return
	}

	stopBeat := make(chan struct{})
	var beating sync.WaitGroup
	if q.beat > 0 {
		beating.Add(1)
		go func() {
			defer beating.Done()
			t := time.NewTicker(q.beat)
			defer t.Stop()
			for {
				select {
				case <-stopBeat:
					return
				case <-t.C:
					if err := msg.InProgress(); err != nil {
						log.Warn("in-progress heartbeat failed", "error", err)
					}
				}
			}
		}()
	}
	stop := func() {
		if stopBeat != nil {
			close(stopBeat)
			beating.Wait()
			stopBeat = nil
		}
	}
	defer stop()
	payload, itemObj, perr := w.payload(ctx, q, msg)
	if perr == nil {
		payload, perr = q.process(ctx, Item{ID: id, Payload: payload})
	}

	r := Result{ID: id, Payload: payload, Worker: w.o.Name, Deliveries: delivered}
	if perr != nil {
		stop()
		w.stats.Failed.Add(1)
		if ctx.Err() != nil {
			// Shutting down: hand the item back at once.
			_ = msg.Nak()
			return
		}
		if delivered < uint64(w.o.MaxAttempts) {
			log.Warn("item failed; it will be delivered again", "delivery", delivered, "error", perr)
			_ = msg.NakWithDelay(time.Duration(delivered) * time.Second)
			return
		}
		log.Error("item failed on its last attempt; storing the failure", "delivery", delivered, "error", perr)
		r.Payload, r.Err = nil, perr.Error()
	}
	// A large result's upload runs while the heartbeat still does.
	val, ok := w.encode(ctx, q, log, key, msg, r)
	stop()
	if ok {
		w.commit(q, log, key, msg, val, itemObj)
	}
}

// payload is the delivered item's payload, read from the object store
// when the message refers to it (then also returning the object's name).
func (w *worker) payload(ctx context.Context, q *jobQueue, msg jetstream.Msg) ([]byte, string, error) {
	h := msg.Headers().Get(objectHeader)
	if h == "" {
		return msg.Data(), "", nil
	}
	ref, err := decodeRef([]byte(h))
	if err != nil {
		return nil, "", fmt.Errorf("the item's message: %w", err)
	}
	b, err := getObject(ctx, q.objects, ref)
	if err != nil {
		return nil, "", fmt.Errorf("the item's payload: %w", err)
	}
	return b, ref.Name, nil
}

// itemObject is the name of the object the message's item payload is
// in; "" when it is inline.
func itemObject(msg jetstream.Msg) string {
	if h := msg.Headers().Get(objectHeader); h != "" {
		if ref, err := decodeRef([]byte(h)); err == nil {
			return ref.Name
		}
	}
	return ""
}

// encode is r as the value to store: inline, or a reference to the
// object it was uploaded to when it is over the inline limit. When it
// cannot be made the item is handed back and ok is false.
func (w *worker) encode(ctx context.Context, q *jobQueue, log *slog.Logger, key string, msg jetstream.Msg, r Result) (val []byte, ok bool) {
	if len(r.Err) > w.inline/2 {
		// A failure's message is kept inline, cut to fit.
		r.Err = r.Err[:w.inline/2] + "…"
	}
	s := toStored(r)
	val, err := json.Marshal(s)
	if err != nil {
		log.Error("cannot encode the result", "error", err)
		_ = msg.Nak()
		return nil, false
	}
	if len(val) <= w.inline || r.Err != "" {
		return val, true
	}
	var rd io.Reader
	if w.o.upload != nil {
		rd = w.o.upload(r.Payload)
	}
	// Even when ctx ends (shutting down) the result is worth keeping.
	// Without a deadline, each chunk's publish waits for its ack at most
	// the JetStream default timeout, which bounds an upload that stalls.
	up := context.WithoutCancel(ctx)
	ref, err := putObject(up, q.objects, w.nc, uniqueName("result/"+key), r.Payload, rd)
	if err != nil {
		if r.Deliveries < uint64(w.o.MaxAttempts) {
			log.Warn("cannot upload the result; handed back", "bytes", len(r.Payload), "delivery", r.Deliveries, "error", err)
			_ = msg.NakWithDelay(time.Duration(r.Deliveries) * time.Second)
			return nil, false
		}
		// The last attempt: what is stored says why, rather than the
		// item going round for ever.
		log.Error("cannot upload the result on the last attempt; storing the failure", "bytes", len(r.Payload), "error", err)
		r.Payload, r.Err = nil, fmt.Sprintf("its result of %d bytes could not be stored in the object store %s: %v", len(r.Payload), ObjectsBucket(q.job), err)
		return w.encode(ctx, q, log, key, msg, r)
	}
	s.Payload, s.Object = nil, &ref
	if val, err = json.Marshal(s); err != nil {
		_ = msg.Nak()
		return nil, false
	}
	log.Debug("result uploaded", "object", ref.Name, "bytes", ref.Size)
	return val, true
}

// commit creates an item's result (refused when it already has one; a
// refused result's object is deleted) and acknowledges the delivery; a
// result that cannot be stored now hands the item back. Once the item
// has a result, the object its payload came in is deleted.
func (w *worker) commit(q *jobQueue, log *slog.Logger, key string, msg jetstream.Msg, val []byte, itemObj string) {
	var own *objectRef
	if s, err := decodeResult(val); err == nil {
		own = s.Object
	}
	store, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := q.results.Create(store, key, val)
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		// Another delivery of the item finished first: its result stands.
		// Its object goes before it is counted (tests wait on the count).
		w.deleteObject(store, q, log, own)
		w.stats.Duplicate.Add(1)
		log.Info("result refused: the item already has one")
	case err != nil:
		log.Warn("cannot store the result; handed back", "error", err)
		w.deleteObject(store, q, log, own)
		_ = msg.Nak()
		return
	default:
		w.stats.Done.Add(1)
		log.Debug("result stored")
	}
	if itemObj != "" {
		w.deleteObject(store, q, log, &objectRef{Name: itemObj})
	}
	// Not waited for: the result is stored, so a delivery that comes
	// again because this ack was lost is skipped.
	if err := msg.Ack(); err != nil {
		log.Debug("ack failed", "error", err)
	}
}

// deleteObject removes an object no result refers to; one left behind
// goes when the job is finished.
func (w *worker) deleteObject(ctx context.Context, q *jobQueue, log *slog.Logger, ref *objectRef) {
	if ref == nil {
		return
	}
	if err := deleteObject(ctx, q.objects, ref.Name); err != nil {
		log.Warn("cannot delete an object no result refers to; it goes when the job is finished", "error", err)
	}
}
