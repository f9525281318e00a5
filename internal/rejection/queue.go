package rejection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// BeamItem is what a worker is asked to do: one beam of one sample.
type BeamItem struct {
	Seq    int64          `json:"seq"`
	Beam   int            `json:"beam"`
	Sample *expand.Sample `json:"sample"`
}

// remoteBeam is beam for a run whose beams are done by a queue's workers.
// It holds its in-flight slot until the beam came back.
func (r *runner) remoteBeam(ctx context.Context, j *job, b int) (*Candidate, error) {
	c, err := func() (*Candidate, error) {
		payload, err := json.Marshal(BeamItem{Seq: j.seq, Beam: b, Sample: j.s})
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("%d/%d", j.seq, b)
		res, err := r.o.Queue.Do(ctx, workqueue.Item{ID: id, Payload: payload})
		if errors.Is(err, workqueue.ErrItemFailed) {
			err = errors.Join(err, r.o.Queue.Forget(context.WithoutCancel(ctx), id))
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("beam %s: %w (finished beams are kept; rerun to resume)", id, err)
		}
		var l journalLine
		if err := decodeJournalLine(res.Payload, &l); err != nil || l.Candidate == nil {
			return nil, fmt.Errorf("beam %s: the result of worker %s is not a scored beam: %v", id, res.Worker, err)
		}
		if l.Seq != j.seq || l.Beam != b {
			return nil, fmt.Errorf("beam %s: worker %s returned beam %d of sample %d", id, res.Worker, l.Beam, l.Seq)
		}
		r.log.Debug("beam collected", "item", id, "worker", res.Worker, "deliveries", res.Deliveries)
		r.workersMu.Lock()
		if r.workers == nil {
			r.workers = map[string]int64{}
		}
		r.workers[res.Worker]++
		r.workersMu.Unlock()
		l.Candidate.key = l.Key
		return l.Candidate, nil
	}()
	<-r.sem
	j.prompt.release()
	j.record.release()
	return c, err
}

// Worker is the process a work queue's worker runs for the items of a
// run that [Run] hands out with [Options.Queue]: it generates and scores
// the beam an item names, with opts (the run's teacher, judge and
// sampling settings; Concurrency bounds the items it works on at once)
// and returns it as the journal line Run reads. A teacher that refuses
// the request gives a beam with its error, as in a local run; one that
// stays unavailable fails the item, which the queue hands out again.
func Worker(opts *Options) (workqueue.Process, error) {
	if opts == nil || opts.Teacher == nil || opts.TeacherModel == "" || opts.Scorer == nil {
		return nil, errors.New("rejection: a teacher, its model name and a scorer are required")
	}
	r := &runner{o: *opts, log: opts.Logger}
	if err := r.o.normalize(); err != nil {
		return nil, err
	}
	r.o.Queue = nil
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.sem = make(chan struct{}, r.o.Concurrency)
	return func(ctx context.Context, it workqueue.Item) ([]byte, error) {
		var w BeamItem
		if err := json.Unmarshal(it.Payload, &w); err != nil {
			return nil, fmt.Errorf("work item %s: %w", it.ID, err)
		}
		if w.Sample == nil || w.Beam < 1 || w.Beam > r.o.Beams {
			return nil, fmt.Errorf("work item %s: want a sample and a beam from 1 to %d", it.ID, r.o.Beams)
		}
		j := &job{seq: w.Seq, s: w.Sample}
		j.prompt.users.Store(1)
		j.record.users.Store(1)
		select {
		case r.sem <- struct{}{}: // beam frees it once the teacher answered
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c, err := r.beam(ctx, j, w.Beam)
		if err != nil {
			return nil, err
		}
		return trajectory.Marshal(journalLine{Key: c.key, Seq: w.Seq, Beam: w.Beam, Candidate: c})
	}, nil
}
