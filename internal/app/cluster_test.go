package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/jetstore"
	_ "github.com/agentworld/agentworld/internal/natsserver" // the embedded server
	"github.com/agentworld/agentworld/internal/testkit"
)

// TestServerErrNamesItsField: an embedded server that fails to start
// names the route listen address only for an error about it, and the
// store directory otherwise (a node started without a listen address
// too).
func TestServerErrNamesItsField(t *testing.T) {
	listenErr := fmt.Errorf("embedded NATS server: %w %q: bind: address already in use", jetstore.ErrListen, "0.0.0.0:6222")
	storeErr := errors.New("embedded NATS server: Can't start JetStream: could not create storage directory")
	for _, tc := range []struct {
		name   string
		listen string
		err    error
		field  string
	}{
		{"a listener that could not be opened", "0.0.0.0:6222", listenErr, "Cluster.Listen"},
		{"a store that could not be created, with a listen address", "0.0.0.0:6222", storeErr, "Cluster.StoreDir"},
		{"a store that could not be created, a single node", "", storeErr, "Cluster.StoreDir"},
		{"a listen error without a listen address", "", listenErr, "Cluster.StoreDir"},
		{"no embedded server linked in", "", jetstore.ErrNoEmbeddedServer, "Cluster.StoreDir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := serverErr(&ClusterConfig{StoreDir: "/var/lib/nats", Listen: tc.listen}, tc.err)
			wantConfigField(t, err, tc.field)
			if !errors.Is(err, tc.err) {
				t.Errorf("error %v does not wrap %v", err, tc.err)
			}
		})
	}
}

// TestClusterStartStopsWithItsContext: a node whose context ends (a
// SIGTERM) while it waits for routes that never connect stops with the
// cancellation, not with a configuration error blaming its routes.
func TestClusterStartStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// the store waits for the route (a port no one listens on) once the
	// server is up: the context ends then
	testHookStep = func(s string) error {
		if s == "nats" {
			time.AfterFunc(500*time.Millisecond, cancel)
		}
		return nil
	}
	t.Cleanup(func() { testHookStep = nil })
	cfg := Config{Cluster: &ClusterConfig{StoreDir: t.TempDir(), Listen: freeAddr(t), Routes: []string{"nats://" + freeAddr(t)},
		Node: "n", Addr: "http://127.0.0.1:8080"}}
	leaks := testkit.Leaks(t)
	start := time.Now()
	a, err := New(ctx, cfg)
	if a != nil {
		_ = a.Close(context.Background())
	}
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrConfig) || strings.Contains(err.Error(), "routes never connected") {
		t.Fatalf("New = %v; want context.Canceled and no configuration error", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("New returned after %s, well after its context ended", d)
	}
	leaks.Check(0)
}
