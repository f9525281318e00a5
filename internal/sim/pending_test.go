package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// unansweredStore is a store whose next appends fail as a shared store's
// do while its stream elects a leader.
type unansweredStore struct {
	Store
	fail atomic.Int32 // appends left to fail
}

func (s *unansweredStore) AppendTurn(ctx context.Context, id string, t TurnRecord, status string) error {
	if s.fail.Add(-1) >= 0 {
		return fmt.Errorf("%w: no stream leader", ErrStoreUnavailable)
	}
	return s.Store.AppendTurn(ctx, id, t, status)
}

// TestRetryReusesTheUnrecordedAnswer: a step whose model answer arrived
// but whose append the store did not take is retried by the client; the
// retry of that very request is answered with the answer kept, so the
// model (counted at the fake server) is asked once per turn. A retry
// that asks for something else is asked of the model.
func TestRetryReusesTheUnrecordedAnswer(t *testing.T) {
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: fmt.Sprintf("<predicted_observation>answer %d</predicted_observation>", r.Seq)}
	})
	defer srv.Close()
	st := &unansweredStore{Store: NewMemStore()}
	m := newTestManager(t, worldmodel.New(srv.URL, "m", &worldmodel.Options{MaxRetries: -1}), Options{Store: st})
	ctx := context.Background()
	rep, err := m.Create(ctx, CreateRequest{WorldID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	req := func(action string, turn int) StepRequest {
		return StepRequest{Action: json.RawMessage(`[{"keystrokes":"` + action + `\n"}]`), Turn: turn, Labels: map[string]string{"k": "v"}}
	}

	st.fail.Store(2)
	for try := range 2 {
		if _, err := m.Step(ctx, rep.SessionID, req("ls", 1)); !errors.Is(err, ErrStoreUnavailable) {
			t.Fatalf("try %d: %v, want ErrStoreUnavailable", try, err)
		}
	}
	res, err := m.Step(ctx, rep.SessionID, req("ls", 1))
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.Count(); n != 1 || res.Observation != "answer 1" {
		t.Fatalf("after two unrecorded tries and a recorded one: %d model requests, observation %q; want 1, the first answer", n, res.Observation)
	}

	// Turn 2's first request is not recorded; its retry asks for another
	// action, which the model answers anew.
	st.fail.Store(1)
	if _, err := m.Step(ctx, rep.SessionID, req("pwd", 2)); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatal(err)
	}
	if res, err = m.Step(ctx, rep.SessionID, req("whoami", 2)); err != nil {
		t.Fatal(err)
	}
	if n := srv.Count(); n != 3 || res.Observation != "answer 3" {
		t.Fatalf("a retry with another action: %d model requests, observation %q; want 3, a new answer", n, res.Observation)
	}
	_, turns, err := st.LoadSession(ctx, rep.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 2 || turns[0].Observation != "answer 1" || turns[1].Observation != "answer 3" {
		t.Fatalf("transcript %+v, want answers 1 and 3", turns)
	}
}
