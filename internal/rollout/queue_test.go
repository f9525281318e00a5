package rollout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/workqueue"
	"github.com/agentworld/agentworld/internal/workqueue/workqueuetest"
)

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
			q := &workqueuetest.Queue{Process: Worker(Embedded{M: m}, opts())}
			dir := t.TempDir()
			o := opts()
			o.Queue = q
			res, err := Run(context.Background(), nil, tasks, dir, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Done != 18 || res.Workers[workqueuetest.Worker] != 18 {
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
			asked := q.Asked()
			slices.Sort(asked)
			if diff := cmp.Diff(want, asked); diff != "" {
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
			if res, err := Run(context.Background(), nil, tasks, dir, o); err != nil || res.Resumed != 18 || len(q.Asked()) != 0 {
				t.Errorf("rerun: resumed %d, err %v", res.Resumed, err)
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
	q := &workqueuetest.Queue{Process: func(ctx context.Context, it workqueue.Item) ([]byte, error) {
		if it.ID == "task-00/1" && fail {
			return nil, errors.New("policy down")
		}
		return work(ctx, it)
	}}
	dir := t.TempDir()
	qo := *o
	qo.Queue = q
	res, err := Run(context.Background(), nil, issueTasks(1), dir, &qo)
	if err == nil || res.Done != 1 || res.Failed != 1 || !slices.Equal(q.Forgot(), []string{"task-00/1"}) {
		t.Fatalf("done %d failed %d forgot %v err %v", res.Done, res.Failed, q.Forgot(), err)
	}
	fail = false
	if res, err := Run(context.Background(), nil, issueTasks(1), dir, &qo); err != nil || res.Resumed != 1 || res.Done != 1 {
		t.Fatalf("rerun: %+v %v", res, err)
	}
}
