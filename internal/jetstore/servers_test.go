package jetstore_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// TestSetupSaysWhatItWaitsFor: a store whose replicas outnumber the
// cluster's servers (three on two) is never placed; New logs a warning
// naming the replicas it wants and the servers it sees while it retries,
// and its error says the same when it gives up, instead of waiting in
// silence.
func TestSetupSaysWhatItWaitsFor(t *testing.T) {
	urls := natstest.StartCluster(t, 2, nil)
	nc, err := nats.Connect(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// the first warning ends the wait (a quiet New gives up after
	// SetupTimeout): New returns the error it met
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	var warned map[string]any
	log := slog.New(recordHandler(func(r slog.Record) {
		if r.Level < slog.LevelWarn {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if warned != nil {
			return
		}
		warned = map[string]any{"msg": strings.Contains(r.Message, "stream "+jetstore.DefaultStream)}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != "err" {
				warned[a.Key] = a.Value.Any()
			}
			return true
		})
		cancel()
	}))
	_, err = jetstore.New(ctx, nc, &jetstore.Options{Replicas: 3, Servers: func() int { return 2 }, SetupTimeout: 30 * time.Second, Logger: log})
	mu.Lock()
	defer mu.Unlock()
	if d := cmp.Diff(map[string]any{"msg": true, "replicas": int64(3), "servers": int64(2)}, warned); d != "" {
		t.Errorf("the warning (-want +got):\n%s", d)
	}
	if err == nil || !strings.Contains(err.Error(), "wants 3 replicas, one per server, and this node sees 2") {
		t.Errorf("New: %v; want an error naming the replicas and servers", err)
	}
}

// recordHandler is a slog.Handler passing each record to f.
type recordHandler func(slog.Record)

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h(r)
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }
