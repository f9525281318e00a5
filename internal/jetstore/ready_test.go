package jetstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/jetstore"
)

// TestReadyFollowsTheLease: a node is ready once New renewed its lease,
// and stops being ready within its lease once its NATS server is gone and
// its heartbeats fail; a store without a node name is always ready.
func TestReadyFollowsTheLease(t *testing.T) {
	srv := startServer(t, t.TempDir())
	nc := connect(t, srv)
	t.Cleanup(nc.Close)
	const lease = 600 * time.Millisecond
	st := open(t, nc, &jetstore.Options{Node: "a", Addr: "http://a", Lease: lease})
	t.Cleanup(func() { _ = st.Close() })
	plain := open(t, nc, nil)
	if err := plain.Ready(); err != nil {
		t.Errorf("a store without a node: Ready = %v", err)
	}
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Ready(); err != nil {
		t.Fatalf("Ready after New: %v", err)
	}
	t0 := time.Now()
	srv.Shutdown()
	deadline := time.Now().Add(lease + 5*time.Second)
	for st.Ready() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("still ready %s after its server shut down (lease %s)", lease+5*time.Second, lease)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("not ready %s after its server shut down (lease %s)", time.Since(t0).Round(time.Millisecond), lease)
	if err := st.Ready(); !strings.Contains(err.Error(), "node a last renewed its lease") {
		t.Errorf("Ready's reason: %v", err)
	}
}
