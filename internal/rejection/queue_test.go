package rejection

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

	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/workqueue"
	"github.com/agentworld/agentworld/internal/workqueue/workqueuetest"
)

// TestQueueRunMatchesLocal: a run whose beams go through a work queue
// (done by Worker on the items Run hands out, "SEQ/BEAM") writes the
// bytes of a local run; a rerun asks for nothing; an item no worker could
// do fails the run, is forgotten by the queue and is done by the rerun.
func TestQueueRunMatchesLocal(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	const samples, beams = 12, 3
	writeSamples(t, in, samples, 0, 256)
	sc, err := reward.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := func() *Options {
		return &Options{Teacher: &countingTeacher{}, TeacherModel: "teacher", Scorer: sc, Beams: beams, Concurrency: 4}
	}
	ref := filepath.Join(dir, "ref")
	if _, err := Run(context.Background(), []string{in}, ref, opts()); err != nil {
		t.Fatal(err)
	}
	work, err := Worker(opts())
	if err != nil {
		t.Fatal(err)
	}
	fail := true
	var failMu sync.Mutex
	q := &workqueuetest.Queue{Process: func(ctx context.Context, it workqueue.Item) ([]byte, error) {
		failMu.Lock()
		f := fail
		failMu.Unlock()
		if it.ID == "5/2" && f {
			return nil, errors.New("teacher unavailable")
		}
		return work(ctx, it)
	}}
	out := filepath.Join(dir, "queued")
	o := opts()
	o.Queue = q
	if _, err := Run(context.Background(), []string{in}, out, o); err == nil || !slices.Equal(q.Forgot(), []string{"5/2"}) {
		t.Fatalf("a failed item: err %v, forgot %v", err, q.Forgot())
	}
	failMu.Lock()
	fail = false
	failMu.Unlock()
	res, err := Run(context.Background(), []string{in}, out, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 0 || res.Workers[workqueuetest.Worker] == 0 {
		t.Errorf("the coordinator made %d teacher requests; beams by worker %v", res.Requests, res.Workers)
	}
	var want []string
	for s := range samples {
		for b := 1; b <= beams; b++ {
			want = append(want, fmt.Sprintf("%d/%d", s, b))
		}
	}
	asked := slices.Compact(slices.Sorted(slices.Values(q.Asked())))
	slices.Sort(want)
	if diff := cmp.Diff(want, asked); diff != "" {
		t.Errorf("items asked for (-want +got):\n%s", diff)
	}
	for _, f := range []string{CandidatesFile, SFTFile, PairsFile, SummaryFile} {
		a, _ := os.ReadFile(filepath.Join(ref, f))
		b, _ := os.ReadFile(filepath.Join(out, f))
		if (f == CandidatesFile && len(a) == 0) || string(a) != string(b) {
			t.Errorf("%s differs from a local run's (%d bytes, want %d)", f, len(b), len(a))
		}
	}
	q.Asked()
	if _, err := Run(context.Background(), []string{in}, out, o); err != nil || len(q.Asked()) != 0 {
		t.Errorf("the rerun of a finished run asked for items: err %v", err)
	}
}
