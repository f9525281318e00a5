package app

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestClusterNodeStopsWhenStoreDoesNotAnswer: a cluster node whose store
// no longer answers (the whole cluster stopping at once leaves the last
// node without a quorum; here its NATS server is gone) closes without an
// error and within a bound: handing back its lease is an optimisation
// (the lease expires anyway), so failing to is a warning, not a failed
// stop. serve's exit status is Close's error.
func TestClusterNodeStopsWhenStoreDoesNotAnswer(t *testing.T) {
	srv, err := server.NewServer(&server.Options{
		ServerName: "shutdown", Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(time.Minute) {
		t.Fatal("NATS server not ready")
	}
	var logs syncBuffer
	// A lease whose third (the heartbeat's period and timeout) is well
	// over the second the release is given.
	const lease = 9 * time.Second
	a, err := New(t.Context(), Config{
		Cluster: &ClusterConfig{URL: srv.ClientURL(), Node: "n1", Addr: "http://n1.invalid", Lease: lease},
		Logger:  slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	// Long enough for the next heartbeat (a third of the lease after
	// New's) to be waiting on the missing server: Close ends it instead of
	// waiting it out.
	time.Sleep(lease/3 + 500*time.Millisecond)
	start := time.Now()
	err = a.Close(context.Background())
	took := time.Since(start)
	if err != nil {
		t.Errorf("Close = %v, want nil (releasing the lease is best-effort)", err)
	}
	// The release is given a second; before, Close waited out the
	// heartbeat in flight and then two seconds for the release.
	if bound := 1800 * time.Millisecond; took > bound {
		t.Errorf("Close took %s, want at most %s", took, bound)
	}
	if !strings.Contains(logs.String(), "release node lease") {
		t.Errorf("no warning about the lease not released; logs:\n%s", logs.String())
	}
	t.Logf("Close took %s", took)
}
