package jetstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/jetstore"
)

// streams lists the JetStream streams on nc's server.
func streams(t *testing.T, nc *nats.Conn) []string {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	l := js.StreamNames(t.Context())
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// block makes a stream that claims subjects, so that creating the facts
// stream or groups bucket on them fails until unblock removes it.
func block(t *testing.T, nc *nats.Conn, subjects string) (unblock func()) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "BLOCKER", Subjects: []string{subjects}}); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := js.DeleteStream(t.Context(), "BLOCKER"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFactsStreamOnFirstUse: a store creates no facts stream until a
// ledger is used; a failed creation is tried again by the next use, not
// remembered; many concurrent first uses on two nodes all succeed, and a
// node that only reads finds the facts another node appended.
func TestFactsStreamOnFirstUse(t *testing.T) {
	ctx := context.Background()
	nc := serve(t)
	a := open(t, nc, &jetstore.Options{Node: "a", Lease: testLease})
	b := open(t, nc, &jetstore.Options{Node: "b", Lease: testLease})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	if got := streams(t, nc); slices.Contains(got, jetstore.DefaultFactsStream) {
		t.Fatalf("streams before any ledger was used: %v", got)
	}
	unblock := block(t, nc, jetstore.DefaultFactsPrefix+">")
	if err := a.AppendFacts(ctx, "w", []fiction.Fact{{World: "w", Entity: "e", Attribute: "k", Value: "v"}}); err == nil {
		t.Fatal("facts appended while their stream could not be made")
	}
	if _, err := b.WorldFacts(ctx, "w"); err == nil {
		t.Fatal("facts read while their stream could not be made")
	}
	unblock()
	const writers = 8
	var wg sync.WaitGroup
	for i := range 2 * writers {
		wg.Go(func() {
			if i%2 == 1 { // a reader on node b
				if _, err := b.WorldFacts(ctx, "w"); err != nil {
					t.Error(err)
				}
				return
			}
			f := fiction.Fact{World: "w", Entity: fmt.Sprintf("e%d", i), Attribute: "k", Value: "v"}
			if err := a.AppendFacts(ctx, "w", []fiction.Fact{f}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// a third node, which never wrote, reads them all
	c := open(t, nc, &jetstore.Options{Node: "c", Lease: testLease})
	t.Cleanup(func() { _ = c.Close() })
	facts, err := c.WorldFacts(ctx, "w")
	if err != nil || len(facts) != writers {
		t.Fatalf("node c read %d facts, %v; want %d", len(facts), err, writers)
	}
	if got := streams(t, nc); !slices.Contains(got, jetstore.DefaultFactsStream) {
		t.Fatalf("streams after the ledger was used: %v", got)
	}
}

// TestGroupsBucketOnFirstUse: a store creates no groups bucket until a
// reset group is used; a failed creation is tried again by the next call,
// not remembered.
func TestGroupsBucketOnFirstUse(t *testing.T) {
	nc := serve(t)
	a := open(t, nc, &jetstore.Options{Node: "a", Lease: testLease})
	b := open(t, nc, &jetstore.Options{Node: "b", Lease: testLease})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	bucket := "KV_" + jetstore.DefaultGroupsBucket
	if got := streams(t, nc); slices.Contains(got, bucket) {
		t.Fatalf("streams before any reset group: %v", got)
	}
	var r roots
	unblock := block(t, nc, "$KV."+jetstore.DefaultGroupsBucket+".>")
	if id, err := a.GroupRoot(t.Context(), "g", "", r.create("a"), r.discard); err == nil {
		t.Fatalf("a root %q without a groups bucket", id)
	}
	unblock()
	oneRoot(t, []*jetstore.Store{a, b}, &r, "g", 8)
	if got := streams(t, nc); !slices.Contains(got, bucket) {
		t.Fatalf("streams after a reset group: %v", got)
	}
}
