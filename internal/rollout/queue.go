package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentworld/agentworld/internal/workqueue"
)

// WorkItem is what a worker is asked to run: members of a task's group.
type WorkItem struct {
	Task    Task  `json:"task"`
	Samples []int `json:"samples"`
}

// itemID names the work item of samples of task t's group.
func itemID(t Task, samples []int, tree bool) string {
	if tree {
		return t.ID
	}
	return t.ID + "/" + strconv.Itoa(samples[0])
}

// dispatch is start for a run whose episodes run on a queue's workers:
// one item per member (a tree group's members in one), each waited for
// by a goroutine of g.wg holding a slot.
func (g *groups) dispatch(ctx context.Context, t Task, todo []int, finish finishFunc) bool {
	tree := g.o.BranchAt > 0
	items := [][]int{todo}
	if !tree {
		items = make([][]int, len(todo))
		for n, i := range todo {
			items[n] = []int{i}
		}
	}
	for _, samples := range items {
		if !g.acquire(ctx) {
			return false
		}
		g.wg.Go(func() {
			defer g.release()
			rows, err := g.remote(ctx, t, samples, tree)
			finish(t, samples, rows, err)
		})
	}
	return true
}

// remote runs one item on the queue and returns its rows.
func (g *groups) remote(ctx context.Context, t Task, samples []int, tree bool) ([]Row, error) {
	payload, err := json.Marshal(WorkItem{Task: t, Samples: samples})
	if err != nil {
		return nil, err
	}
	id := itemID(t, samples, tree)
	res, err := g.o.Queue.Do(ctx, workqueue.Item{ID: id, Payload: payload})
	if errors.Is(err, workqueue.ErrItemFailed) {
		err = errors.Join(err, g.o.Queue.Forget(context.WithoutCancel(ctx), id))
	}
	if err != nil {
		return nil, err
	}
	var rows []Row
	if err := json.Unmarshal(res.Payload, &rows); err != nil {
		return nil, fmt.Errorf("work item %s: the result of worker %s: %w", id, res.Worker, err)
	}
	if len(rows) != len(samples) {
		return nil, fmt.Errorf("work item %s: worker %s returned %d rows, want %d", id, res.Worker, len(rows), len(samples))
	}
	for n, r := range rows {
		if r.GroupID != t.ID || r.SampleIdx != samples[n] {
			return nil, fmt.Errorf("work item %s: worker %s returned the row of task %s sample %d, want sample %d", id, res.Worker, r.GroupID, r.SampleIdx, samples[n])
		}
	}
	g.o.Logger.Debug("rollout: episodes collected", "item", id, "worker", res.Worker, "deliveries", res.Deliveries)
	g.mu.Lock()
	if g.workers == nil {
		g.workers = map[string]int{}
	}
	g.workers[res.Worker] += len(rows)
	g.mu.Unlock()
	return rows, nil
}

// Worker is the process a work queue's worker runs for the items of a
// run that [Run] hands out with [Options.Queue]: it runs each item's
// members on s with opts ([RunGroup]) and returns their rows. opts must
// be the run's (its Policy, GroupSize, MaxTurns, BranchAt and LWMModel
// make the rows); its MaxInFlight bounds the members of one item run at
// once.
func Worker(s Simulator, opts *Options) workqueue.Process {
	return func(ctx context.Context, it workqueue.Item) ([]byte, error) {
		var w WorkItem
		if err := json.Unmarshal(it.Payload, &w); err != nil {
			return nil, fmt.Errorf("work item %s: %w", it.ID, err)
		}
		if len(w.Samples) == 0 {
			return nil, fmt.Errorf("work item %s: no samples", it.ID)
		}
		rows, err := RunGroup(ctx, s, w.Task, w.Samples, opts)
		if err != nil {
			return nil, err
		}
		return json.Marshal(rows)
	}
}
