package rollout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/workqueue"
)

// inProcessQueue is a [Dispatcher] that runs each item at once with a
// worker's process, keeping each result once as the work queue does; it
// records the items asked for and forgotten.
type inProcessQueue struct {
	process workqueue.Process
	mu      sync.Mutex
	results map[string]workqueue.Result
	asked   []string
	forgot  []string
}

func (q *inProcessQueue) Do(ctx context.Context, it workqueue.Item) (workqueue.Result, error) {
	q.mu.Lock()
	q.asked = append(q.asked, it.ID)
	r, ok := q.results[it.ID]
	q.mu.Unlock()
	if !ok {
		payload, err := q.process(ctx, it)
		if ctx.Err() != nil {
			// The coordinator gave up (a real queue's worker would go on).
			return workqueue.Result{}, ctx.Err()
		}
		r = workqueue.Result{ID: it.ID, Payload: payload, Worker: "w"}
		if err != nil {
			r = workqueue.Result{ID: it.ID, Err: err.Error(), Worker: "w"}
		}
		q.mu.Lock()
		q.results[it.ID] = r
		q.mu.Unlock()
	}
	if r.Err != "" {
		return r, fmt.Errorf("%w: item %s: %s", workqueue.ErrItemFailed, it.ID, r.Err)
	}
	return r, nil
}

func (q *inProcessQueue) Forget(_ context.Context, id string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.results, id)
	q.forgot = append(q.forgot, id)
	return nil
}

// TestQueueRunMatchesLocal: a run whose episodes go through a work queue
// (run by Worker on the items Run hands out) writes the rows and summary
// of a local run; items are episodes "TASK/SAMPLE", or whole groups
// "TASK" for tree groups; a rerun asks for nothing.
func TestQueueRunMatchesLocal(t *testing.T) {
	for _, branchAt := range []int{0, 1} {
		t.Run(fmt.Sprintf("branch-at %d", branchAt), func(t *testing.T) {
			tasks := issueTasks(6)
			m, _ := fakeWorld(t)
			pol := newFakePolicy(t, byInstruction)
			opts := func() *Options {
				return &Options{Policy: &Policy{URL: pol.srv.URL + "/v1", Model: "pol"}, GroupSize: 3, BranchAt: branchAt, MaxInFlight: 4}
			}
			ref := t.TempDir()
			if _, err := Run(context.Background(), Embedded{M: m}, tasks, ref, opts()); err != nil {
				t.Fatal(err)
			}
			q := &inProcessQueue{process: Worker(Embedded{M: m}, opts()), results: map[string]workqueue.Result{}}
			dir := t.TempDir()
			o := opts()
			o.Queue = q
			res, err := Run(context.Background(), nil, tasks, dir, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Done != 18 || res.Workers["w"] != 18 {
				t.Errorf("done %d, by worker %v", res.Done, res.Workers)
			}
			var want []string
			for _, task := range tasks {
				if branchAt > 0 {
					want = append(want, task.ID)
					continue
				}
				for i := range 3 {
					want = append(want, fmt.Sprintf("%s/%d", task.ID, i))
				}
			}
			slices.Sort(q.asked)
			if diff := cmp.Diff(want, q.asked); diff != "" {
				t.Errorf("items asked for (-want +got):\n%s", diff)
			}
			wantRows, err := readRows(filepath.Join(ref, EpisodesFile))
			if err != nil {
				t.Fatal(err)
			}
			gotRows, err := readRows(filepath.Join(dir, EpisodesFile))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(normalize(wantRows), normalize(gotRows)); diff != "" {
				t.Errorf("queued rows differ from local ones (-local +queued):\n%s", diff)
			}
			wantSum, _ := os.ReadFile(filepath.Join(ref, SummaryFile))
			gotSum, _ := os.ReadFile(filepath.Join(dir, SummaryFile))
			if diff := cmp.Diff(string(wantSum), string(gotSum)); diff != "" {
				t.Errorf("summary differs (-local +queued):\n%s", diff)
			}
			q.asked = nil
			if res, err := Run(context.Background(), nil, tasks, dir, o); err != nil || res.Resumed != 18 || len(q.asked) != 0 {
				t.Errorf("rerun: resumed %d, asked %v, err %v", res.Resumed, q.asked, err)
			}
		})
	}
}

// TestQueueFailedItemForgotten: an item no worker could do fails its
// episode, is not written, and is forgotten by the queue, so a rerun
// runs it.
func TestQueueFailedItemForgotten(t *testing.T) {
	m, _ := fakeWorld(t)
	pol := newFakePolicy(t, byInstruction)
	o := &Options{Policy: &Policy{URL: pol.srv.URL + "/v1", Model: "pol"}, GroupSize: 2}
	work := Worker(Embedded{M: m}, o)
	fail := true
	q := &inProcessQueue{results: map[string]workqueue.Result{}, process: func(ctx context.Context, it workqueue.Item) ([]byte, error) {
		if it.ID == "task-00/1" && fail {
			return nil, errors.New("policy down")
		}
		return work(ctx, it)
	}}
	dir := t.TempDir()
	qo := *o
	qo.Queue = q
	res, err := Run(context.Background(), nil, issueTasks(1), dir, &qo)
	if err == nil || res.Done != 1 || res.Failed != 1 || !slices.Equal(q.forgot, []string{"task-00/1"}) {
		t.Fatalf("done %d failed %d forgot %v err %v", res.Done, res.Failed, q.forgot, err)
	}
	fail = false
	if res, err := Run(context.Background(), nil, issueTasks(1), dir, &qo); err != nil || res.Resumed != 1 || res.Done != 1 {
		t.Fatalf("rerun: %+v %v", res, err)
	}
}
