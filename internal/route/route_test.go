package route

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

type fakeReplica struct {
	mu    sync.Mutex
	calls int
	down  bool
}

func (f *fakeReplica) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return nil, fmt.Errorf("%w: connection refused", worldmodel.ErrUnavailable)
	}
	return &worldmodel.Response{Content: "ok"}, nil
}

func newRouter(n int, clock *time.Time) (*Router, []*fakeReplica) {
	var reps []Replica
	var fakes []*fakeReplica
	for i := 0; i < n; i++ {
		f := &fakeReplica{}
		fakes = append(fakes, f)
		reps = append(reps, Replica{Name: fmt.Sprintf("r%d", i), C: f})
	}
	return New(reps, &Options{Now: func() time.Time { return *clock }}), fakes
}

func TestStickyBoundedAndFailover(t *testing.T) {
	now := time.Unix(1000, 0)
	r, fakes := newRouter(4, &now)
	// Stickiness: a key keeps its replica.
	first := map[string]int{}
	for i := 0; i < 400; i++ {
		k := fmt.Sprint("session-", i)
		p, err := r.Pick(k)
		if err != nil {
			t.Fatal(err)
		}
		first[k] = p
	}
	for k, p := range first {
		if q, _ := r.Pick(k); q != p {
			t.Fatalf("%s moved from %d to %d", k, p, q)
		}
	}
	// Bounded loads: no replica holds more than ceil(1.25 * 400 / 4) keys.
	for _, l := range r.Loads() {
		if l.Keys > 125 {
			t.Fatalf("replica %s holds %d keys, bound 125", l.Name, l.Keys)
		}
	}
	// Failover: the replica of a key goes down; the request succeeds
	// elsewhere, the key moves, and the dead replica rests for Cooldown.
	ctx := worldmodel.WithAffinity(context.Background(), "session-7")
	dead := first["session-7"]
	fakes[dead].down = true
	resp, err := r.Complete(ctx, worldmodel.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ServedBy == fmt.Sprintf("r%d", dead) {
		t.Fatalf("served by the dead replica")
	}
	if p, _ := r.Pick("session-7"); p == dead {
		t.Fatal("key stayed on the dead replica")
	}
	calls := fakes[dead].calls
	for i := 0; i < 20; i++ {
		_, _ = r.Complete(worldmodel.WithAffinity(context.Background(), fmt.Sprint("session-", i)), worldmodel.Request{})
	}
	if fakes[dead].calls != calls {
		t.Fatalf("dead replica called during its cooldown")
	}
	// All down: a clear unavailability error.
	for _, f := range fakes {
		f.down = true
	}
	now = now.Add(time.Minute)
	if _, err := r.Complete(worldmodel.WithAffinity(context.Background(), "x"), worldmodel.Request{}); !errors.Is(err, worldmodel.ErrUnavailable) {
		t.Fatalf("all replicas down: %v", err)
	}
}

// TestPlacementAgreesAcrossRouters: two routers over the same replicas
// stand for two nodes of a cluster with different local loads. Sessions
// placed by one node go to the same replicas on the other when their
// requests name the replica that served them before (as a session taken
// over after its node died does, from its transcript); without that, the
// second node's bounded loads place some of them elsewhere. A preferred
// replica that is down is failed over like any other.
func TestPlacementAgreesAcrossRouters(t *testing.T) {
	now := time.Unix(1000, 0)
	a, _ := newRouter(3, &now)
	b, fakes := newRouter(3, &now)
	// Node b is busy with sessions of its own, so its bounded loads differ.
	for i := range 300 {
		if _, err := b.pick(fmt.Sprint("b-own-", i), "", -1); err != nil {
			t.Fatal(err)
		}
	}
	served := map[string]string{}
	for i := range 200 {
		k := fmt.Sprint("moved-", i)
		resp, err := a.Complete(worldmodel.WithAffinity(context.Background(), k), worldmodel.Request{})
		if err != nil {
			t.Fatal(err)
		}
		served[k] = resp.ServedBy
	}
	c, _ := newRouter(3, &now) // a third node, as busy as b, without preferences
	for i := range 300 {
		_, _ = c.pick(fmt.Sprint("b-own-", i), "", -1)
	}
	differ := 0
	for k, name := range served {
		ctx := worldmodel.WithReplica(worldmodel.WithAffinity(context.Background(), k), name)
		resp, err := b.Complete(ctx, worldmodel.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.ServedBy != name {
			t.Errorf("session %s: served by %s on node a, by %s on node b", k, name, resp.ServedBy)
		}
		// and stays there on its next request
		if p, _ := b.pick(k, "", -1); b.reps[p].Name != name {
			t.Errorf("session %s: assigned to %s on node b after a request there, not %s", k, b.reps[p].Name, name)
		}
		if p, _ := c.pick(k, "", -1); c.reps[p].Name != name {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("without preferences the busy node placed every session as the idle one did: the test shows nothing")
	}
	t.Logf("without the recorded replica, %d of %d sessions would have moved", differ, len(served))

	// A preferred replica that is down: the request fails over.
	k := "moved-0"
	dead := b.byName[served[k]]
	fakes[dead].down = true
	resp, err := b.Complete(worldmodel.WithReplica(worldmodel.WithAffinity(context.Background(), k), served[k]), worldmodel.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ServedBy == served[k] {
		t.Fatal("served by the replica that is down")
	}
	// While it rests, the preference is not honoured either.
	if p, _ := b.pick(k, served[k], -1); p == dead {
		t.Fatal("preferred replica chosen during its cooldown")
	}
}
