package jetstore_test

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/jetstore"
	_ "github.com/agentworld/agentworld/internal/natsserver" // the embedded server
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store/storetest"
)

// startServer runs an embedded single server for the test, in a fresh
// directory.
func startServer(t testing.TB, dir string) jetstore.Embedded {
	t.Helper()
	srv, err := jetstore.StartServer(jetstore.ServerOptions{Name: "n1", StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// testLease is the node lease of the ownership tests: a minute, so that a
// loaded machine delaying heartbeats cannot let a live node's lease lapse
// (or its own sessions go untrusted) in the middle of a test; the tests
// end leases by Close, which deletes them at once. Every store of a test
// has it: the nodes bucket takes the TTL of the last store that opened it.
const testLease = time.Minute

func connect(t testing.TB, srv jetstore.Embedded) *nats.Conn {
	t.Helper()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// serve runs a fresh embedded server for the test and connects to it;
// both close when the test ends.
func serve(t testing.TB) *nats.Conn {
	t.Helper()
	srv := startServer(t, t.TempDir())
	t.Cleanup(srv.Shutdown)
	nc := connect(t, srv)
	t.Cleanup(nc.Close)
	return nc
}

func open(t testing.TB, nc *nats.Conn, o *jetstore.Options) *jetstore.Store {
	t.Helper()
	st, err := jetstore.New(t.Context(), nc, o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestConformance runs the session-store suite against the JetStream
// store; a reopen shuts the server down and starts it again on the same
// directory, so what the suite reads back came from disk.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (sim.Store, func(t *testing.T) sim.Store) {
		dir := t.TempDir()
		srv := startServer(t, dir)
		nc := connect(t, srv)
		st := open(t, nc, nil)
		t.Cleanup(func() { nc.Close(); srv.Shutdown() })
		return st, func(t *testing.T) sim.Store {
			_ = st.Close()
			nc.Close()
			srv.Shutdown()
			srv = startServer(t, dir)
			nc = connect(t, srv)
			return open(t, nc, nil)
		}
	})
}

// TestStaleWriterRefused: two stores over one stream load a session; the
// one that appends second, with a copy that lacks the other's turn, is
// refused with sim.ErrMoved and appends after loading again.
func TestStaleWriterRefused(t *testing.T) {
	nc := serve(t)
	a, b := open(t, nc, nil), open(t, nc, nil)
	ctx := t.Context()
	if err := a.CreateSession(ctx, storetest.Session("s_x"), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.LoadSession(ctx, "s_x"); err != nil {
		t.Fatal(err)
	}
	if err := a.AppendTurn(ctx, "s_x", storetest.Turn(1), sim.StatusActive); err != nil {
		t.Fatal(err)
	}
	if err := b.AppendTurn(ctx, "s_x", storetest.Turn(1), sim.StatusActive); !errors.Is(err, sim.ErrMoved) {
		t.Fatalf("stale append = %v, want sim.ErrMoved", err)
	}
	_, turns, err := b.LoadSession(ctx, "s_x")
	if err != nil || len(turns) != 1 {
		t.Fatalf("after the refused append: %d turns, %v; want 1", len(turns), err)
	}
	if err := b.AppendTurn(ctx, "s_x", storetest.Turn(2), sim.StatusActive); err != nil {
		t.Fatalf("append after reloading: %v", err)
	}
	if err := a.AppendTurn(ctx, "s_x", storetest.Turn(2), sim.StatusActive); !errors.Is(err, sim.ErrMoved) {
		t.Fatalf("the first writer, now stale: %v, want sim.ErrMoved", err)
	}
}

// TestOwnership: the creating node owns a session; another node sees it
// alive until the owner's lease goes (Close deletes it at once; a node
// that remembers the owner alive forgets it when a forward fails), then
// claims it with a compare-and-set that a second claimer loses.
func TestOwnership(t *testing.T) {
	nc := serve(t)
	ctx := t.Context()
	a := open(t, nc, &jetstore.Options{Node: "a", Addr: "http://a", Lease: testLease})
	b := open(t, nc, &jetstore.Options{Node: "b", Addr: "http://b", Lease: testLease})
	c := open(t, nc, &jetstore.Options{Node: "c", Addr: "http://c", Lease: testLease})
	t.Cleanup(func() { _ = b.Close(); _ = c.Close() })
	if err := a.CreateSession(ctx, storetest.Session("s_own"), nil); err != nil {
		t.Fatal(err)
	}
	l, err := b.Owner(ctx, "s_own")
	if err != nil || l.Node != "a" || !l.Alive || l.Addr != "http://a" || l.Backend != "replay" {
		t.Fatalf("owner seen by b = %+v, %v; want a, alive", l, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b.Forget("s_own") // as the router does when its forward to a fails
	if l, err = b.Owner(ctx, "s_own"); err != nil || l.Alive {
		t.Fatalf("owner after a closed = %+v, %v; want not alive", l, err)
	}
	stale := l
	if err := b.Claim(ctx, "s_own", l); err != nil {
		t.Fatal(err)
	}
	if err := c.Claim(ctx, "s_own", stale); !errors.Is(err, jetstore.ErrClaimLost) {
		t.Fatalf("second claim = %v, want ErrClaimLost", err)
	}
	if l, err = c.Owner(ctx, "s_own"); err != nil || l.Node != "b" || !l.Alive {
		t.Fatalf("owner after b's claim = %+v, %v", l, err)
	}
	if l, err = c.Owner(ctx, "s_none"); err != nil || l.Revision != 0 {
		t.Fatalf("owner of an unknown session = %+v, %v; want none", l, err)
	}
}

// TestOwnerWatchSeesShutdown: a node that remembers another node's
// session with its owner alive sees the owner gone, without being told
// to forget, once the owner's clean shutdown reaches its watch of the
// node leases.
func TestOwnerWatchSeesShutdown(t *testing.T) {
	nc := serve(t)
	ctx := t.Context()
	a := open(t, nc, &jetstore.Options{Node: "a", Addr: "http://a", Lease: testLease})
	b := open(t, nc, &jetstore.Options{Node: "b", Addr: "http://b", Lease: testLease})
	t.Cleanup(func() { _ = b.Close() })
	if err := a.CreateSession(ctx, storetest.Session("s_w"), nil); err != nil {
		t.Fatal(err)
	}
	if l, err := b.Owner(ctx, "s_w"); err != nil || !l.Alive {
		t.Fatalf("owner seen by b = %+v, %v; want a, alive", l, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitOwnerDead(t, b, "s_w")
}

// waitOwnerDead waits until st sees session id's owner dead: a shut-down
// node's delete reaches the others' watch of the nodes bucket
// asynchronously. The deadline only bounds a hang.
func waitOwnerDead(t *testing.T, st *jetstore.Store, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := st.Owner(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !l.Alive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("owner of %s still seen alive a minute after it shut down", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOwnSessionsFromMemory: a node answers who owns its own sessions
// without reading the owners bucket (a record removed behind its back
// does not change its answer), and forgets that it owns one once another
// writer appended to it (sim.ErrMoved): then it reads the bucket again.
func TestOwnSessionsFromMemory(t *testing.T) {
	nc := serve(t)
	ctx := t.Context()
	a := open(t, nc, &jetstore.Options{Node: "a", Addr: "http://a", Lease: testLease})
	t.Cleanup(func() { _ = a.Close() })
	other := open(t, nc, &jetstore.Options{Lease: testLease}) // a writer taking part in no ownership
	if err := a.CreateSession(ctx, storetest.Session("s_m"), nil); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, jetstore.DefaultOwnersBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, base64.RawURLEncoding.EncodeToString([]byte("s_m"))); err != nil {
		t.Fatal(err)
	}
	if l, err := a.Owner(ctx, "s_m"); err != nil || l.Node != "a" || !l.Alive || l.Revision == 0 {
		t.Fatalf("a's own session = %+v, %v; want a, alive, from memory", l, err)
	}
	if _, _, err := other.LoadSession(ctx, "s_m"); err != nil {
		t.Fatal(err)
	}
	if err := other.AppendTurn(ctx, "s_m", storetest.Turn(1), sim.StatusActive); err != nil {
		t.Fatal(err)
	}
	if err := a.AppendTurn(ctx, "s_m", storetest.Turn(1), sim.StatusActive); !errors.Is(err, sim.ErrMoved) {
		t.Fatalf("stale append = %v, want sim.ErrMoved", err)
	}
	if l, err := a.Owner(ctx, "s_m"); err != nil || l.Revision != 0 {
		t.Fatalf("after another writer: %+v, %v; want the bucket's answer (no record)", l, err)
	}
}
