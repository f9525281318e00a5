package workqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/natsconn"
)

// Options configure a [Coordinator]. Nil means every default.
type Options struct {
	// JobsBucket names the bucket of job descriptions; "" means
	// DefaultJobsBucket.
	JobsBucket string
	// Replicas is how many servers keep the job's stream and buckets;
	// 0 means 1. A job that must survive a server's loss needs 3.
	Replicas int
	// AckWait is how long an item may go without an ack or a heartbeat
	// before another worker gets it; 0 means DefaultAckWait. It is fixed
	// when the job is first opened.
	AckWait time.Duration
	// PollInterval is how often a waiting Do reads its result directly,
	// in case a watch update was missed (a reconnect); 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// SetupTimeout bounds Open's wait for JetStream; 0 means
	// DefaultSetupTimeout.
	SetupTimeout time.Duration
	// InlineLimit is the largest item payload or job spec sent in one
	// message; a larger one goes through the job's object store. 0 means
	// DefaultInlineLimit; the server's max_payload lowers it.
	InlineLimit int
	// Logger receives what the coordinator does; nil discards it.
	Logger *slog.Logger
}

// Coordinator is the side of a job that puts items in and takes results
// out. Its methods may be called concurrently.
type Coordinator struct {
	o       Options
	log     *slog.Logger
	job     Job
	nc      *nats.Conn
	js      jetstream.JetStream
	jobs    jetstream.KeyValue
	results jetstream.KeyValue
	objects jetstream.ObjectStore
	watch   jetstream.KeyWatcher
	inline  int // the largest value sent in one message
	// desc and descRev are the job description this coordinator wrote
	// and its revision in the jobs bucket: Abandon deletes the entry
	// only while it is still that write, and puts desc back when the
	// job turns out used.
	desc    []byte
	descRev uint64

	mu      sync.Mutex
	waiters map[string][]chan found // item key → the Do calls waiting for it

	stopWatch context.CancelFunc
	closed    chan struct{}
	done      chan struct{}
	once      sync.Once
}

// Open opens job on nc (which the caller closes after the coordinator):
// it creates the job's stream, consumer and results bucket when missing,
// writes the job's description for workers and starts watching results.
// Opening a job that exists (a restarted coordinator) keeps its items and
// results.
func Open(ctx context.Context, nc *nats.Conn, job Job, opts *Options) (*Coordinator, error) {
	if err := checkJob(job); err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.JobsBucket == "" {
		o.JobsBucket = DefaultJobsBucket
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.AckWait == 0 {
		o.AckWait = DefaultAckWait
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.SetupTimeout == 0 {
		o.SetupTimeout = DefaultSetupTimeout
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	c := &Coordinator{o: o, log: log.With("job", job.ID), job: job, nc: nc, js: js, inline: inlineLimit(nc, o.InlineLimit),
		waiters: map[string][]chan found{}, closed: make(chan struct{}), done: make(chan struct{})}
	setup, cancel := context.WithTimeout(ctx, o.SetupTimeout)
	defer cancel()
	// Workers starting meanwhile may be creating the jobs bucket too, and
	// all but one creator of it get no answer: short, growing attempts.
	if err := natsconn.RetryGrowing(setup, func(ctx context.Context) (err error) {
		c.jobs, err = openJobs(ctx, js, o.JobsBucket, o.Replicas)
		return err
	}); err != nil {
		return nil, fmt.Errorf("work queue: open the jobs bucket %s: %w", o.JobsBucket, err)
	}
	// A try may upload a large spec: a second more per MiB of it.
	per := 10*time.Second + time.Duration(len(job.Spec)>>20)*time.Second
	if err := natsconn.Retry(setup, per, c.setup); err != nil {
		return nil, fmt.Errorf("work queue: set up job %s (stream %s, bucket %s): %w", job.ID, JobStream(job.ID), ResultsBucket(job.ID), err)
	}
	// Watching starts before any Do reads a result, so that a result
	// stored after that read is seen by the watch. It lasts until Close,
	// whatever becomes of ctx.
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w, err := c.results.WatchAll(wctx, jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		stop()
		return nil, fmt.Errorf("work queue: watch the results of job %s: %w", job.ID, err)
	}
	c.watch, c.stopWatch = w, stop
	go c.dispatch()
	return c, nil
}

func (c *Coordinator) setup(ctx context.Context) error {
	id := c.job.ID
	if _, err := c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        JobStream(id),
		Description: "agentworld work queue of job " + id + ", one subject per item",
		Subjects:    []string{subjectPrefix(id) + ">"},
		Storage:     jetstream.FileStorage,
		Replicas:    c.o.Replicas,
		Retention:   jetstream.WorkQueuePolicy,
		// One message per item at a time: an item enqueued again while
		// it waits or is worked on is refused.
		MaxMsgsPerSubject:    1,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
	}); err != nil {
		return err
	}
	if _, err := c.js.CreateOrUpdateConsumer(ctx, JobStream(id), jetstream.ConsumerConfig{
		Durable:       consumerName,
		Description:   "the workers of job " + id,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.o.AckWait,
		MaxDeliver:    -1, // workers store a failed result after MaxAttempts
		MaxAckPending: -1,
	}); err != nil {
		return err
	}
	results, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      ResultsBucket(id),
		Description: "agentworld results of job " + id + ", one key per item, created once",
		Storage:     jetstream.FileStorage,
		Replicas:    c.o.Replicas,
	})
	if err != nil {
		return err
	}
	c.results = results
	if c.objects, err = openObjects(ctx, c.js, id, c.o.Replicas); err != nil {
		return err
	}
	d := jobDesc{ID: id, Kind: c.job.Kind, Spec: c.job.Spec}
	if len(d.Spec) > c.inline {
		// Named by its digest: a restarted coordinator with the same
		// spec finds it there, and a worker reading it is never cut
		// short by a rewrite.
		ref, err := c.putOnce(ctx, "spec/"+strings.TrimPrefix(digestOf(d.Spec), digestPrefix), d.Spec)
		if err != nil {
			return err
		}
		d.Spec, d.SpecObject = nil, &ref
	}
	desc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	// The description goes last: a worker that sees it finds the stream,
	// consumer and bucket in place. Every coordinator of the job writes
	// it (a rerun, a second one of the same command line), so its
	// revision says whether another opened the job after this one.
	rev, err := c.jobs.Put(ctx, id, desc)
	if err != nil {
		return err
	}
	c.desc, c.descRev = desc, rev
	return nil
}

// openJobs opens (creating when missing) the bucket of job descriptions.
//
// Workers open it with one replica (they do not know the coordinator's
// count), so a bucket a worker made first has fewer replicas than a
// coordinator asks for; the coordinator then raises them, or the jobs of
// a replicated queue would live on one server. Nothing lowers them.
func openJobs(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.KeyValue, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket:      bucket,
		Description: "agentworld work-queue jobs: kind and spec of each open job",
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, err
		}
		return js.CreateOrUpdateKeyValue(ctx, cfg)
	}
	if replicas <= 1 { // a worker: nothing to raise
		return kv, nil
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, err
	}
	if b, ok := st.(*jetstream.KeyValueBucketStatus); !ok || b.StreamInfo().Config.Replicas >= replicas {
		return kv, nil
	}
	return js.CreateOrUpdateKeyValue(ctx, cfg)
}

// Job is the job the coordinator runs.
func (c *Coordinator) Job() Job { return c.job }

// dispatch hands every stored result to the Do calls waiting for it.
func (c *Coordinator) dispatch() {
	defer close(c.done)
	for e := range c.watch.Updates() {
		if e == nil || e.Operation() != jetstream.KeyValuePut {
			continue
		}
		r, err := decodeResult(e.Value())
		if err != nil {
			c.log.Warn("unreadable result", "key", e.Key(), "error", err)
			continue
		}
		c.deliver(e.Key(), found{r, e.Revision()})
	}
}

// found is a stored result as read, with its revision in the bucket.
type found struct {
	r   storedResult
	rev uint64
}

func (c *Coordinator) deliver(key string, r found) {
	c.mu.Lock()
	ws := c.waiters[key]
	delete(c.waiters, key)
	c.mu.Unlock()
	for _, w := range ws {
		w <- r // buffered, one send each
	}
}

// Do runs one item: it returns the item's stored result when there is
// one; otherwise it enqueues the item (unless it is already waiting or
// being worked on, from an earlier coordinator) and waits until a worker
// stores its result or ctx ends. A result whose Err is set (the item
// failed on every attempt) is returned with an error wrapping
// ErrItemFailed. A result stored as an object is read and checked
// against its reference; one that is missing or damaged is dropped and
// the item done again (up to maxBadObjects times).
func (c *Coordinator) Do(ctx context.Context, it Item) (Result, error) {
	if it.ID == "" {
		return Result{}, errors.New("work queue: an item needs an id")
	}
	key := itemKey(it.ID)
	w := make(chan found, 1)
	c.wait(key, w)
	defer func() { c.unwait(key, w) }()

	f, ok, err := c.stored(ctx, key)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		if err := c.enqueue(ctx, key, it.Payload); err != nil {
			return Result{}, err
		}
	}
	poll := time.NewTicker(c.o.PollInterval)
	defer poll.Stop()
	// rewait registers a new w after the watch handed the old one a
	// result Do does not return (the watch hands each waiter one). It is
	// a new channel because the old one may still hold that result (Do
	// had found it by polling): deliver's send to it would block the
	// watch, and every other item's delivery, until Do next reads it.
	rewait := func() {
		c.unwait(key, w)
		w = make(chan found, 1)
		c.wait(key, w)
	}
	var dropped uint64 // results up to this revision were unreadable and dropped
	for bad := 0; ; {
		if ok && f.rev > dropped {
			r, err := c.resolve(ctx, it.ID, f)
			if !errors.Is(err, errBadObject) {
				return r, err
			}
			if bad++; bad >= maxBadObjects {
				return Result{}, fmt.Errorf("%w: item %s: %d stored results could not be read: %w", ErrItemFailed, it.ID, bad, err)
			}
			c.log.Warn("the item's result object is unreadable; doing the item again", "item", it.ID, "error", err)
			dropped = f.rev
			rewait()
			if err := c.drop(ctx, key, f); err != nil {
				return Result{}, err
			}
			if err := c.enqueue(ctx, key, it.Payload); err != nil {
				return Result{}, err
			}
		}
		ok = false
		select {
		case f = <-w:
			ok = true
			if f.rev <= dropped {
				rewait() // a late copy of the dropped result
			}
		case <-poll.C:
			if g, stored, err := c.stored(ctx, key); err == nil && stored {
				f, ok = g, true
			}
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-c.closed:
			return Result{}, ErrClosed
		}
	}
}

// resolve is the result f records, its payload read from the object
// store when it is there. A transient failure to read it is retried a
// few times; an object that is missing or not the one referred to fails
// with errBadObject at once.
func (c *Coordinator) resolve(ctx context.Context, id string, f found) (Result, error) {
	r := f.r.result()
	if f.r.Object == nil {
		return r, r.failed()
	}
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return Result{}, ctx.Err()
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		if r.Payload, err = getObject(ctx, c.objects, *f.r.Object); err == nil || errors.Is(err, errBadObject) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return Result{}, fmt.Errorf("work queue: read the result of job %s item %s: %w", c.job.ID, id, err)
	}
	return r, nil
}

// drop deletes a stored result that cannot be read, unless another
// replaced it meanwhile, and its object.
func (c *Coordinator) drop(ctx context.Context, key string, f found) error {
	err := c.results.Delete(ctx, key, jetstream.LastRevision(f.rev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) && !isWrongLastSequence(err) {
		return fmt.Errorf("work queue: drop the unreadable result of job %s item %s: %w", c.job.ID, key, err)
	}
	if f.r.Object != nil {
		if err := deleteObject(ctx, c.objects, f.r.Object.Name); err != nil {
			c.log.Warn("cannot delete an unreadable result object", "error", err)
		}
	}
	return nil
}

// isWrongLastSequence reports a write refused for naming a stale revision.
func isWrongLastSequence(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Forget deletes an item's stored result, so that a later Do runs the
// item again: for a result the caller does not keep (an endpoint failure
// a rerun should retry). Forgetting an item without a result does nothing.
func (c *Coordinator) Forget(ctx context.Context, id string) error {
	key := itemKey(id)
	f, ok, err := c.stored(ctx, key)
	if err != nil && !ok {
		// Unreadable: deleted all the same.
		c.log.Warn("forgetting an unreadable result", "item", id, "error", err)
	}
	if err := c.results.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("work queue: forget job %s item %s: %w", c.job.ID, id, err)
	}
	if ok && f.r.Object != nil {
		if err := deleteObject(ctx, c.objects, f.r.Object.Name); err != nil {
			return fmt.Errorf("work queue: forget job %s item %s: %w", c.job.ID, id, err)
		}
	}
	return nil
}

// stored reads an item's result record, if one is stored.
func (c *Coordinator) stored(ctx context.Context, key string) (found, bool, error) {
	e, err := c.results.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return found{}, false, nil
	}
	if err != nil {
		return found{}, false, fmt.Errorf("work queue: read the result of job %s item %s: %w", c.job.ID, key, err)
	}
	r, err := decodeResult(e.Value())
	return found{r, e.Revision()}, err == nil, err
}

// enqueue publishes an item; the stream refuses a second message on the
// item's subject while the first is there, which is not an error here.
// A payload over the inline limit goes to the object store first, and
// the message refers to it.
func (c *Coordinator) enqueue(ctx context.Context, key string, payload []byte) error {
	m := nats.NewMsg(subjectPrefix(c.job.ID) + key)
	m.Data = payload
	if len(payload) > c.inline {
		// Named by item and digest: a restarted coordinator enqueuing
		// the item again finds the object in place.
		ref, err := c.putOnce(ctx, "item/"+key+"/"+strings.TrimPrefix(digestOf(payload), digestPrefix), payload)
		if err != nil {
			return fmt.Errorf("work queue: enqueue job %s item %s: %w", c.job.ID, key, err)
		}
		h, err := json.Marshal(ref)
		if err != nil {
			return err
		}
		m.Data = nil
		m.Header.Set(objectHeader, string(h))
	}
	_, err := c.js.PublishMsg(ctx, m)
	if err == nil {
		c.log.Debug("enqueued", "item", key)
		return nil
	}
	if alreadyQueued(err) {
		c.log.Debug("already queued", "item", key)
		return nil
	}
	return fmt.Errorf("work queue: enqueue job %s item %s: %w", c.job.ID, key, err)
}

// errCodeStoreFailed is the server's JSStreamStoreFailedF.
const errCodeStoreFailed jetstream.ErrorCode = 10077

// alreadyQueued reports the stream's refusal of a second message on an
// item's subject (MaxMsgsPerSubject 1 with DiscardNewPerSubject): the
// server's error 10077 (a message not stored) with its reason.
func alreadyQueued(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == errCodeStoreFailed &&
		strings.Contains(api.Description, "maximum messages per subject exceeded")
}

// putOnce stores data as object name unless an object of that name
// already holds it.
func (c *Coordinator) putOnce(ctx context.Context, name string, data []byte) (objectRef, error) {
	want := objectRef{Name: name, Size: uint64(len(data)), Digest: digestOf(data)}
	info, err := c.objects.GetInfo(ctx, name)
	if err == nil && info.Size == want.Size && info.Digest == want.Digest {
		return want, nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return want, fmt.Errorf("object %s: %w", name, err)
	}
	return putObject(ctx, c.objects, c.nc, name, data, nil)
}

func (c *Coordinator) wait(key string, w chan found) {
	c.mu.Lock()
	c.waiters[key] = append(c.waiters[key], w)
	c.mu.Unlock()
}

func (c *Coordinator) unwait(key string, w chan found) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := c.waiters[key]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(c.waiters, key)
	} else {
		c.waiters[key] = ws
	}
}

// Close stops watching results and fails the Do calls still waiting with
// ErrClosed. The job stays, for a coordinator opened later to resume.
func (c *Coordinator) Close() error {
	var err error
	c.once.Do(func() {
		close(c.closed)
		err = c.watch.Stop()
		c.stopWatch()
		<-c.done
	})
	return err
}

// Abandon closes the coordinator after a run that failed or stopped, and
// removes the job as Finish does when nothing of it could be resumed: no
// item was ever queued on its stream and no result is stored. A
// coordinator that failed before its first item (input it could not
// read) so leaves no job behind for workers to serve for ever; a rerun
// with corrected input pins another job id anyway. A job with work
// queued stays, for a rerun to resume. It reports whether the job was
// removed.
//
// Another coordinator of the same job id (the same command run again, or
// restarted by a supervisor) may have opened the job meanwhile and not
// queued anything yet. Each Open writes the job's description, so
// Abandon deletes the description only while it is still this
// coordinator's write (a delete conditional on its revision); one
// written since means the job is someone else's too, and it stays. Only
// after that delete does Abandon remove the stream and buckets, checking
// once more that nothing was queued (an earlier-opened coordinator may
// have queued since): if something was, it writes the description back
// and keeps the job. What this does not cover is a coordinator that
// opens the job during the removal itself (between the delete and the
// last bucket's), a window of a few round trips: its run then fails on
// the missing stream, and its rerun opens the job afresh.
func (c *Coordinator) Abandon(ctx context.Context) (removed bool, err error) {
	cerr := c.Close()
	unused, err := c.unused(ctx)
	if err != nil {
		return false, errors.Join(cerr, fmt.Errorf("work queue: look whether job %s was used: %w", c.job.ID, err))
	}
	if !unused {
		return false, cerr
	}
	err = c.jobs.Delete(ctx, c.job.ID, jetstream.LastRevision(c.descRev))
	if isWrongLastSequence(err) {
		c.log.Info("the job was opened again by another coordinator; keeping it")
		return false, cerr
	}
	if err != nil {
		return false, errors.Join(cerr, fmt.Errorf("work queue: delete job %s's description: %w", c.job.ID, err))
	}
	// Workers stop serving the job now; a coordinator opened before
	// this one may still have queued an item since the check above.
	if unused, err = c.unused(ctx); err != nil || !unused {
		if _, perr := c.jobs.Create(ctx, c.job.ID, c.desc); perr != nil && !errors.Is(perr, jetstream.ErrKeyExists) {
			err = errors.Join(err, fmt.Errorf("put job %s's description back: %w", c.job.ID, perr))
		}
		if err != nil {
			return false, errors.Join(cerr, fmt.Errorf("work queue: look whether job %s was used: %w", c.job.ID, err))
		}
		c.log.Info("another coordinator queued work on the job meanwhile; keeping it")
		return false, cerr
	}
	if err := c.removeData(ctx); err != nil {
		return false, errors.Join(cerr, fmt.Errorf("work queue: remove job %s: %w", c.job.ID, err))
	}
	return true, cerr
}

// unused reports whether no item of the job was ever queued (its stream's
// last sequence is 0) and no result is stored.
func (c *Coordinator) unused(ctx context.Context) (bool, error) {
	st, err := c.js.Stream(ctx, JobStream(c.job.ID))
	if err != nil {
		return false, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return false, err
	}
	if info.State.LastSeq != 0 {
		return false, nil
	}
	rs, err := c.results.Status(ctx)
	if err != nil {
		return false, err
	}
	return rs.Values() == 0, nil
}

// Finish closes the coordinator and removes the job: its description
// (so workers stop serving it), its stream, its results and its objects
// (large values, including uploads workers left half done). Call it once
// every result is kept elsewhere.
func (c *Coordinator) Finish(ctx context.Context) error {
	cerr := c.Close()
	if err := c.remove(ctx); err != nil {
		return err
	}
	return cerr
}

// remove deletes the job's description, stream, results and objects.
func (c *Coordinator) remove(ctx context.Context) error {
	id := c.job.ID
	var errs []error
	if err := c.jobs.Delete(ctx, id); err != nil {
		errs = append(errs, fmt.Errorf("delete job %s's description: %w", id, err))
	}
	if err := c.removeData(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("work queue: remove job %s: %w", id, err)
	}
	return nil
}

// removeData deletes the job's stream, results and objects.
func (c *Coordinator) removeData(ctx context.Context) error {
	id := c.job.ID
	var errs []error
	if err := c.js.DeleteStream(ctx, JobStream(id)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		errs = append(errs, fmt.Errorf("delete stream %s: %w", JobStream(id), err))
	}
	if err := c.js.DeleteKeyValue(ctx, ResultsBucket(id)); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		errs = append(errs, fmt.Errorf("delete bucket %s: %w", ResultsBucket(id), err))
	}
	if err := c.js.DeleteObjectStore(ctx, ObjectsBucket(id)); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		errs = append(errs, fmt.Errorf("delete object store %s: %w", ObjectsBucket(id), err))
	}
	return errors.Join(errs...)
}
