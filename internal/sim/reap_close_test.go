package sim

import (
	"context"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/world"
)

// stuckStatusStore is a store whose SetStatus waits until its context
// ends, as a cluster store without a quorum does (for up to its Wait).
type stuckStatusStore struct {
	*MemStore
	entered chan struct{}
}

func (s *stuckStatusStore) SetStatus(ctx context.Context, _, _ string) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestCloseEndsReaperPass: Close does not wait for the idle reaper's
// expiries when the store does not answer them (expiring is best-effort
// housekeeping): it ends the pass under way and returns at once.
func TestCloseEndsReaperPass(t *testing.T) {
	st := &stuckStatusStore{MemStore: NewMemStore(), entered: make(chan struct{}, 1)}
	model := &scriptedModel{}
	m := New(&Options{Store: st, IdleTTL: 4 * time.Millisecond,
		Worlds:   map[string]*world.Spec{"t": termWorld()},
		Backends: map[string]BackendFactory{BackendModel: NewModelBackend(model, &ModelOptions{MaxTokens: 1000})}})
	for range 3 {
		if _, err := m.Create(context.Background(), CreateRequest{WorldID: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-st.entered:
	case <-time.After(time.Minute):
		t.Fatal("the reaper never expired a session")
	}
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- m.Close(context.Background()) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close = %v", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("Close took %s", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits on the reaper's expiry after 10 s")
	}
}
