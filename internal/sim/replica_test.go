package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

// replicaModel answers like a routed model: it names a serving replica
// (the one the request asked for, else its own pick) and records which
// replica each request asked for.
type replicaModel struct {
	pick string
	mu   sync.Mutex
	// asked is the preferred replica of each request, in order.
	asked []string
}

func (m *replicaModel) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	want := worldmodel.Replica(ctx)
	m.mu.Lock()
	m.asked = append(m.asked, want)
	m.mu.Unlock()
	if want == "" {
		want = m.pick
	}
	return &worldmodel.Response{Content: "<observation>ok</observation>", ServedBy: want}, nil
}

// TestResumedSessionAsksForItsReplica: a session resumed from the store
// by another manager (another node, after a takeover) asks for the
// replica its transcript says served its latest turn, as does its fork;
// a new session asks for none.
func TestResumedSessionAsksForItsReplica(t *testing.T) {
	ctx := context.Background()
	st := NewMemStore()
	first := &replicaModel{pick: "http://replica-b"}
	m := newTestManager(t, first, Options{Store: st})
	rep, err := m.Create(ctx, CreateRequest{WorldID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	step := func(m *Manager, id string, turn int) {
		t.Helper()
		if _, err := m.Step(ctx, id, StepRequest{Action: json.RawMessage(fmt.Sprintf(`[{"keystrokes":"echo %d\n"}]`, turn)), Turn: turn}); err != nil {
			t.Fatal(err)
		}
	}
	step(m, rep.SessionID, 1)
	step(m, rep.SessionID, 2)
	if diff := cmp.Diff([]string{"", "http://replica-b"}, first.asked); diff != "" {
		t.Fatalf("first node's requests asked for (-want +got):\n%s", diff)
	}

	// Another node, whose own router would pick another replica.
	second := &replicaModel{pick: "http://replica-a"}
	m2 := newTestManager(t, second, Options{Store: st})
	step(m2, rep.SessionID, 3)
	fork, err := m2.Fork(ctx, rep.SessionID, ForkRequest{AtTurn: 2})
	if err != nil {
		t.Fatal(err)
	}
	step(m2, fork.SessionID, 3)
	if diff := cmp.Diff([]string{"http://replica-b", "http://replica-b"}, second.asked); diff != "" {
		t.Fatalf("resumed session's and its fork's requests asked for (-want +got):\n%s", diff)
	}
}
