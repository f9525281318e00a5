package workqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// Logger receives what the worker does; nil discards it.
	Logger *slog.Logger
	// Stats, when set, is updated as items are done.
	Stats *Stats
}

// Stats count what a worker did.
type Stats struct {
	// Done counts results stored; Duplicate counts results refused
	// because the item already had one (a redelivered item finished
	// twice); Skipped counts deliveries of items already done, dropped
	// without work; Failed counts Process errors.
	Done, Duplicate, Skipped, Failed atomic.Int64
}

// resultHeadroom is what a stored result's message carries besides its
// value (subject, headers).
const resultHeadroom = 4 << 10

// worker is one run of [Work].
type worker struct {
	o     WorkerOptions
	log   *slog.Logger
	nc    *nats.Conn
	js    jetstream.JetStream
	kind  string
	start Start
	slots chan struct{}
	stats *Stats
	wg    sync.WaitGroup
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
		slots: make(chan struct{}, o.Concurrency), stats: stats}
	var jobs jetstream.KeyValue
	setup, cancel := context.WithTimeout(ctx, o.SetupTimeout)
	err = natsconn.Retry(setup, 10*time.Second, func(ctx context.Context) (err error) {
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
			var job Job
			if err := json.Unmarshal(e.Value(), &job); err != nil {
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

// serve pulls one job's items while ctx lasts, one per free slot.
func (w *worker) serve(ctx context.Context, job Job) {
	log := w.log.With("job", job.ID)
	var (
		cons    jetstream.Consumer
		results jetstream.KeyValue
	)
	if err := natsconn.Retry(ctx, 10*time.Second, func(ctx context.Context) (err error) {
		if cons, err = w.js.Consumer(ctx, JobStream(job.ID), consumerName); err != nil {
			return err
		}
		results, err = w.js.KeyValue(ctx, ResultsBucket(job.ID))
		return err
	}); err != nil {
		if ctx.Err() == nil {
			log.Error("cannot open the job's queue", "error", err)
		}
		return
	}
	process, err := w.start(ctx, job)
	if err != nil {
		log.Error("cannot serve the job; left to other workers", "error", err)
		return
	}
	beat := w.o.Heartbeat
	if beat == 0 {
		beat = cons.CachedInfo().Config.AckWait / 3
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
			w.handle(ctx, log, results, process, beat, msg)
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
func (w *worker) handle(ctx context.Context, log *slog.Logger, results jetstream.KeyValue, process Process, beat time.Duration, msg jetstream.Msg) {
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
		w.store(log, results, key, msg, Result{ID: id, Worker: w.o.Name, Deliveries: delivered,
			Err: fmt.Sprintf("delivered %d times and never finished: its workers died or stopped reporting on it each time", delivered)})
		return
	}

	stopBeat := make(chan struct{})
	var beating sync.WaitGroup
	if beat > 0 {
		beating.Add(1)
		go func() {
			defer beating.Done()
			t := time.NewTicker(beat)
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
	payload, perr := process(ctx, Item{ID: id, Payload: msg.Data()})
	close(stopBeat)
	beating.Wait()

	r := Result{ID: id, Payload: payload, Worker: w.o.Name, Deliveries: delivered}
	if perr != nil {
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
	w.store(log, results, key, msg, r)
}

// store creates an item's result (refused when it already has one) and
// acknowledges the delivery; a result that cannot be stored now hands the
// item back.
func (w *worker) store(log *slog.Logger, results jetstream.KeyValue, key string, msg jetstream.Msg, r Result) {
	val, err := json.Marshal(r)
	if err != nil {
		log.Error("cannot encode the result", "error", err)
		_ = msg.Nak()
		return
	}
	if limit := w.nc.MaxPayload(); limit > 0 && int64(len(val)) > limit-resultHeadroom {
		// It would never be stored, and the item would come back for
		// ever: what is stored instead says why.
		log.Error("result too large for the NATS server; storing the failure", "bytes", len(val), "max_payload", limit)
		r.Payload, r.Err = nil, fmt.Sprintf("its result is %d bytes, over the NATS server's max_payload of %d bytes: raise max_payload (up to 64 MB)", len(val), limit)
		if val, err = json.Marshal(r); err != nil {
			_ = msg.Nak()
			return
		}
	}
	store, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := results.Create(store, key, val); errors.Is(err, jetstream.ErrKeyExists) {
		// Another delivery of the item finished first: its result stands.
		w.stats.Duplicate.Add(1)
		log.Info("result refused: the item already has one", "delivery", r.Deliveries)
	} else if err != nil {
		log.Warn("cannot store the result; handed back", "error", err)
		_ = msg.Nak()
		return
	} else {
		w.stats.Done.Add(1)
		log.Debug("result stored", "delivery", r.Deliveries)
	}
	// Not waited for: the result is stored, so a delivery that comes
	// again because this ack was lost is skipped.
	if err := msg.Ack(); err != nil {
		log.Debug("ack failed", "error", err)
	}
}
