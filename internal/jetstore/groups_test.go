package jetstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/agentworld/agentworld/internal/jetstore"
)

// roots makes and discards the root sessions of a GroupRoot test, named
// after the node that made them, and counts both.
type roots struct {
	mu        sync.Mutex
	made      []string
	discarded []string
}

func (r *roots) create(node string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		id := fmt.Sprintf("root-%s-%d", node, len(r.made))
		r.made = append(r.made, id)
		return id, nil
	}
}

func (r *roots) discard(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.discarded = append(r.discarded, id)
}

func (r *roots) counts() (made, discarded int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.made), len(r.discarded)
}

// held is r.create(node) that waits until release is called; started is
// closed when it begins.
func (r *roots) held(node string) (create func(context.Context) (string, error), started <-chan struct{}, release func()) {
	begun, released := make(chan struct{}), make(chan struct{})
	return func(ctx context.Context) (string, error) {
		close(begun)
		<-released
		return r.create(node)(ctx)
	}, begun, func() { close(released) }
}

// answer is what a GroupRoot call returned.
type answer struct {
	id  string
	err error
}

func openNodes(t *testing.T, n int) []*jetstore.Store {
	t.Helper()
	nc := serve(t)
	stores := make([]*jetstore.Store, n)
	for i := range stores {
		stores[i] = open(t, nc, &jetstore.Options{Node: fmt.Sprintf("n%d", i), Lease: testLease})
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	return stores
}

// oneRoot makes that many GroupRoot calls (calls) for group key at once, spread
// over nodes, and checks that they all got one root, made once, none
// discarded; it returns that root.
func oneRoot(t *testing.T, nodes []*jetstore.Store, r *roots, key string, calls int) string {
	t.Helper()
	got := make([]string, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range got {
		n := nodes[i%len(nodes)]
		wg.Go(func() { got[i], errs[i] = n.GroupRoot(t.Context(), key, "", r.create(n.Self()), r.discard) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != got[0] || got[i] == "" {
			t.Fatalf("call %d: %q, %v; call 0 got %q", i, got[i], errs[i], got[0])
		}
	}
	if made, discarded := r.counts(); made != 1 || discarded != 0 {
		t.Fatalf("%d roots made, %d discarded; want 1 and 0", made, discarded)
	}
	return got[0]
}

// TestGroupRootMadeOnce: twelve concurrent calls for one group on three
// nodes get one root, made once, none discarded; a caller that could not
// fork it (stale) gets a new one, which every node then answers.
func TestGroupRootMadeOnce(t *testing.T) {
	nodes := openNodes(t, 3)
	var r roots
	first := oneRoot(t, nodes, &r, "g1", 12)
	renewed, err := nodes[1].GroupRoot(t.Context(), "g1", first, r.create("n1"), r.discard)
	if err != nil || renewed == first {
		t.Fatalf("after %s went stale: %q, %v", first, renewed, err)
	}
	for _, n := range nodes {
		// stale again from a node that had not heard: the new root stands
		id, err := n.GroupRoot(t.Context(), "g1", first, r.create(n.Self()), r.discard)
		if err != nil || id != renewed {
			t.Fatalf("%s: %q, %v; want %q", n.Self(), id, err, renewed)
		}
	}
	if made, _ := r.counts(); made != 2 {
		t.Fatalf("%d roots made, want 2", made)
	}
	other, err := nodes[2].GroupRoot(t.Context(), "g2", "", r.create("n2"), r.discard)
	if err != nil || other == renewed {
		t.Fatalf("another group: %q, %v", other, err)
	}
}

// TestGroupRootWaitsForTheClaim: while one node makes a group's root,
// another node's call waits for it (and makes none); a failed creation
// leaves the group free for the next call.
func TestGroupRootWaitsForTheClaim(t *testing.T) {
	nodes := openNodes(t, 2)
	waiting := make(chan string, 8)
	jetstore.OnGroupWait(nodes[1], func(key string) { waiting <- key })
	var r roots
	slow, started, release := r.held("n0")
	first, second := make(chan answer, 1), make(chan answer, 1)
	go func() {
		id, err := nodes[0].GroupRoot(t.Context(), "g", "", slow, r.discard)
		first <- answer{id, err}
	}()
	<-started
	go func() {
		id, err := nodes[1].GroupRoot(t.Context(), "g", "", r.create("n1"), r.discard)
		second <- answer{id, err}
	}()
	if key := <-waiting; key != "g" {
		t.Fatalf("waited for %q", key)
	}
	release()
	a, b := <-first, <-second
	if a.err != nil || b.err != nil || a.id != b.id {
		t.Fatalf("maker got %q (%v), waiter %q (%v)", a.id, a.err, b.id, b.err)
	}
	if made, discarded := r.counts(); made != 1 || discarded != 0 {
		t.Fatalf("%d roots made, %d discarded; want 1 and 0", made, discarded)
	}

	failed := errors.New("no model")
	_, err := nodes[0].GroupRoot(t.Context(), "h", "", func(context.Context) (string, error) { return "", failed }, r.discard)
	if !errors.Is(err, failed) {
		t.Fatalf("failed creation: %v", err)
	}
	id, err := nodes[1].GroupRoot(t.Context(), "h", "", r.create("n1"), r.discard)
	if err != nil || id == "" {
		t.Fatalf("after a failed creation: %q, %v", id, err)
	}
}

// TestGroupRootTakesOverADeadClaim: a node dies while it makes a group's
// root; another node takes the claim over and makes the root, and the
// dead node's late root is discarded (its call answers the winner's).
func TestGroupRootTakesOverADeadClaim(t *testing.T) {
	nodes := openNodes(t, 2)
	var r roots
	slow, started, release := r.held("n0")
	dead := make(chan answer, 1)
	go func() {
		id, err := nodes[0].GroupRoot(t.Context(), "g", "", slow, r.discard)
		dead <- answer{id, err}
	}()
	<-started
	if err := nodes[0].Close(); err != nil { // its lease ends now
		t.Fatal(err)
	}
	id, err := nodes[1].GroupRoot(t.Context(), "g", "", r.create("n1"), r.discard)
	if err != nil || id != "root-n1-0" {
		t.Fatalf("takeover: %q, %v", id, err)
	}
	release()
	a := <-dead
	if a.err != nil || a.id != id {
		t.Fatalf("the dead node's call: %q, %v; want %q", a.id, a.err, id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.discarded) != 1 || r.discarded[0] != "root-n0-1" {
		t.Fatalf("discarded %v, want the dead node's late root", r.discarded)
	}
}

// TestGroupRootTakesOverItsPreviousProcess: a node restarted under the same
// name (a new store, its lease alive) takes over the claim its previous
// process left while making a root, instead of waiting for itself.
func TestGroupRootTakesOverItsPreviousProcess(t *testing.T) {
	nc := serve(t)
	old := open(t, nc, &jetstore.Options{Node: "n0", Lease: testLease})
	t.Cleanup(func() { _ = old.Close() })
	var r roots
	slow, started, release := r.held("n0")
	done := make(chan answer, 1)
	go func() {
		id, err := old.GroupRoot(t.Context(), "g", "", slow, r.discard)
		done <- answer{id, err}
	}()
	<-started
	restarted := open(t, nc, &jetstore.Options{Node: "n0", Lease: testLease})
	t.Cleanup(func() { _ = restarted.Close() })
	id, err := restarted.GroupRoot(t.Context(), "g", "", r.create("n0"), r.discard)
	if err != nil || id != "root-n0-0" {
		t.Fatalf("the restarted node: %q, %v", id, err)
	}
	release()
	if a := <-done; a.err != nil || a.id != id {
		t.Fatalf("the previous process's call: %q, %v; want %q", a.id, a.err, id)
	}
	if made, discarded := r.counts(); made != 2 || discarded != 1 {
		t.Fatalf("%d roots made, %d discarded; want 2 and 1", made, discarded)
	}
}
