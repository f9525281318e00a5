// Package workqueuetest is an in-process stand-in for a work queue's
// coordinator, for tests of what hands items to one (rollout, data
// sample) without a NATS server: it does each item at once with a
// worker's process and keeps each result once, as the queue does. The
// queue itself is tested against a real server in package workqueue.
package workqueuetest

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentworld/agentworld/internal/workqueue"
)

// Worker is the name results of a [Queue] carry.
const Worker = "w"

// Queue does items with Process and records what it was asked; its
// methods are those of a [workqueue.Coordinator] callers use.
type Queue struct {
	Process workqueue.Process

	mu      sync.Mutex
	results map[string]workqueue.Result
	asked   []string
	forgot  []string
}

// Do returns the item's kept result, or does the item and keeps its
// result: its payload, or its error as a failure, returned wrapping
// [workqueue.ErrItemFailed] as the coordinator does. When ctx ends while
// the item is done, nothing is kept (a real queue's worker would go on).
func (q *Queue) Do(ctx context.Context, it workqueue.Item) (workqueue.Result, error) {
	q.mu.Lock()
	q.asked = append(q.asked, it.ID)
	r, ok := q.results[it.ID]
	q.mu.Unlock()
	if !ok {
		payload, err := q.Process(ctx, it)
		if ctx.Err() != nil {
			return workqueue.Result{}, ctx.Err()
		}
		r = workqueue.Result{ID: it.ID, Payload: payload, Worker: Worker, Deliveries: 1}
		if err != nil {
			r.Payload, r.Err = nil, err.Error()
		}
		q.mu.Lock()
		if q.results == nil {
			q.results = map[string]workqueue.Result{}
		}
		q.results[it.ID] = r
		q.mu.Unlock()
	}
	if r.Err != "" {
		return r, fmt.Errorf("%w: item %s: %s", workqueue.ErrItemFailed, it.ID, r.Err)
	}
	return r, nil
}

// Forget drops an item's kept result.
func (q *Queue) Forget(_ context.Context, id string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.results, id)
	q.forgot = append(q.forgot, id)
	return nil
}

// Asked returns the ids of the items asked for, in order, and forgets
// them (not their results).
func (q *Queue) Asked() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := q.asked
	q.asked = nil
	return a
}

// Forgot returns the ids of the items forgotten, in order.
func (q *Queue) Forgot() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.forgot...)
}
