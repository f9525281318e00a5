// Package storetest is the conformance suite of [sim.Store]: the contract
// every session store keeps (the SQLite store of internal/store, the
// JetStream store of internal/jetstore, sim's MemStore), checked by one
// set of tests that each implementation's tests run with [Run]. It is
// imported by tests only.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/sim"
)

// Factory opens a store for one subtest. Reopen, when not nil, closes
// the store it opened and opens the same backing again (the file, the
// stream), for the checks that what returned survives; nil skips them.
// The suite closes what it opens last.
type Factory func(t *testing.T) (st sim.Store, reopen func(t *testing.T) sim.Store)

// Run runs the suite against the stores open makes.
func Run(t *testing.T, open Factory) {
	cases := []struct {
		name string
		fn   func(t *testing.T, open Factory)
	}{
		{"UnknownSession", unknownSession},
		{"RoundTrip", roundTrip},
		{"CreateWithTurns", createWithTurns},
		{"StatusChanges", statusChanges},
		{"DuplicateCreateRefused", duplicateCreate},
		{"SurvivesReopen", survivesReopen},
		{"ConcurrentSessions", concurrentSessions},
		{"ResultAppender", resultAppender},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

func openOne(t *testing.T, open Factory) (sim.Store, func(t *testing.T) sim.Store) {
	t.Helper()
	st, reopen := open(t)
	t.Cleanup(func() { _ = st.Close() })
	return st, reopen
}

// Session is a session record as the manager makes one, with id.
func Session(id string) sim.SessionRecord {
	seed := int64(7)
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	return sim.SessionRecord{
		ID: id, Root: id, World: "w", Domain: "terminal", Backend: "replay", Model: "m", Seed: &seed,
		Spec: []byte(`{"name":"w","domain":"terminal"}`), SystemPrompt: "You simulate a shell.\n",
		InitialObservation: "$ ", Labels: map[string]string{"k": "v"},
		Status: sim.StatusActive, CreatedAt: now, UpdatedAt: now,
	}
}

// Turn is turn n of a session, with a result whose fields are set.
func Turn(n int) sim.TurnRecord {
	obs := fmt.Sprintf("out %d ünïcode <&>\n", n)
	return sim.TurnRecord{
		Turn:        n,
		HistoryTurn: sim.HistoryTurn{Action: fmt.Sprintf("echo %d", n), Observation: obs, Message: fmt.Sprintf("turn %d", n), Assistant: obs},
		Result: sim.StepResult{Observation: obs, Reward: 0.5, Info: sim.StepInfo{Turn: n, Backend: "replay", Model: "m",
			PromptTokens: 10 * n, CompletionTokens: n, FinishReason: "stop"}},
	}
}

func ctx(t *testing.T) context.Context { return t.Context() }

func mustLoad(t *testing.T, st sim.Store, id string) (sim.SessionRecord, []sim.TurnRecord) {
	t.Helper()
	rec, turns, err := st.LoadSession(ctx(t), id)
	if err != nil {
		t.Fatalf("LoadSession(%s): %v", id, err)
	}
	return rec, turns
}

// sameSession compares what a store must keep of a record: everything
// but UpdatedAt, which a store may set when it writes.
func sameSession(t *testing.T, got, want sim.SessionRecord) {
	t.Helper()
	got.UpdatedAt, want.UpdatedAt = time.Time{}, time.Time{}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("session record (-want +got):\n%s", d)
	}
}

func sameTurns(t *testing.T, got, want []sim.TurnRecord) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("turns (-want +got):\n%s", d)
	}
}

func unknownSession(t *testing.T, open Factory) {
	st, _ := openOne(t, open)
	if _, _, err := st.LoadSession(ctx(t), "s_missing"); !errors.Is(err, sim.ErrNotFound) {
		t.Errorf("LoadSession of an unknown id = %v, want sim.ErrNotFound", err)
	}
	if err := st.AppendTurn(ctx(t), "s_missing", Turn(1), sim.StatusActive); !errors.Is(err, sim.ErrNotFound) {
		t.Errorf("AppendTurn to an unknown id = %v, want sim.ErrNotFound", err)
	}
	if err := st.SetStatus(ctx(t), "s_missing", sim.StatusClosed); !errors.Is(err, sim.ErrNotFound) {
		t.Errorf("SetStatus of an unknown id = %v, want sim.ErrNotFound", err)
	}
	if _, _, err := st.LoadSession(ctx(t), "s_missing"); !errors.Is(err, sim.ErrNotFound) {
		t.Errorf("a failed append made the session exist: %v", err)
	}
}

func roundTrip(t *testing.T, open Factory) {
	st, _ := openOne(t, open)
	s := Session("s_round.trip-1")
	if err := st.CreateSession(ctx(t), s, nil); err != nil {
		t.Fatal(err)
	}
	got, turns := mustLoad(t, st, s.ID)
	sameSession(t, got, s)
	sameTurns(t, turns, nil)
	var want []sim.TurnRecord
	for n := 1; n <= 5; n++ {
		if err := st.AppendTurn(ctx(t), s.ID, Turn(n), sim.StatusActive); err != nil {
			t.Fatalf("AppendTurn %d: %v", n, err)
		}
		want = append(want, Turn(n))
		_, turns := mustLoad(t, st, s.ID)
		sameTurns(t, turns, want)
	}
}

func createWithTurns(t *testing.T, open Factory) {
	st, _ := openOne(t, open)
	s := Session("s_fork")
	s.Parent = "s_parent"
	want := []sim.TurnRecord{Turn(1), Turn(2), Turn(3)}
	if err := st.CreateSession(ctx(t), s, want); err != nil {
		t.Fatal(err)
	}
	got, turns := mustLoad(t, st, s.ID)
	sameSession(t, got, s)
	sameTurns(t, turns, want)
	if err := st.AppendTurn(ctx(t), s.ID, Turn(4), sim.StatusActive); err != nil {
		t.Fatal(err)
	}
	_, turns = mustLoad(t, st, s.ID)
	sameTurns(t, turns, append(want, Turn(4)))
}

func statusChanges(t *testing.T, open Factory) {
	st, _ := openOne(t, open)
	s := Session("s_status")
	if err := st.CreateSession(ctx(t), s, nil); err != nil {
		t.Fatal(err)
	}
	last := Turn(1)
	last.Result.Terminated = true
	if err := st.AppendTurn(ctx(t), s.ID, last, sim.StatusTerminated); err != nil {
		t.Fatal(err)
	}
	if rec, _ := mustLoad(t, st, s.ID); rec.Status != sim.StatusTerminated {
		t.Errorf("status after the ending turn = %q, want %q", rec.Status, sim.StatusTerminated)
	}
	if err := st.SetStatus(ctx(t), s.ID, sim.StatusClosed); err != nil {
		t.Fatal(err)
	}
	rec, turns := mustLoad(t, st, s.ID)
	if rec.Status != sim.StatusClosed {
		t.Errorf("status after SetStatus = %q, want %q", rec.Status, sim.StatusClosed)
	}
	sameTurns(t, turns, []sim.TurnRecord{last})
}

func duplicateCreate(t *testing.T, open Factory) {
	st, _ := openOne(t, open)
	s := Session("s_dup")
	if err := st.CreateSession(ctx(t), s, []sim.TurnRecord{Turn(1)}); err != nil {
		t.Fatal(err)
	}
	other := Session("s_dup")
	other.World = "other"
	if err := st.CreateSession(ctx(t), other, nil); err == nil {
		t.Fatal("a second CreateSession of a stored id succeeded")
	}
	rec, turns := mustLoad(t, st, s.ID)
	sameSession(t, rec, s)
	sameTurns(t, turns, []sim.TurnRecord{Turn(1)})
}

func survivesReopen(t *testing.T, open Factory) {
	st, reopen := open(t)
	if reopen == nil {
		_ = st.Close()
		t.Skip("this store keeps nothing across a reopen")
	}
	s := Session("s_reopen")
	if err := st.CreateSession(ctx(t), s, nil); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		if err := st.AppendTurn(ctx(t), s.ID, Turn(n), sim.StatusActive); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetStatus(ctx(t), s.ID, sim.StatusExpired); err != nil {
		t.Fatal(err)
	}
	st = reopen(t)
	t.Cleanup(func() { _ = st.Close() })
	rec, turns := mustLoad(t, st, s.ID)
	if rec.Status != sim.StatusExpired {
		t.Errorf("status after reopen = %q, want %q", rec.Status, sim.StatusExpired)
	}
	rec.Status = sim.StatusActive
	sameSession(t, rec, s)
	sameTurns(t, turns, []sim.TurnRecord{Turn(1), Turn(2), Turn(3)})
}

func concurrentSessions(t *testing.T, open Factory) {
	st, _ := openOne(t, open)
	const sessions, turns = 16, 8
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("s_conc_%02d", i)
			if err := st.CreateSession(ctx(t), Session(id), nil); err != nil {
				errs <- err
				return
			}
			for n := 1; n <= turns; n++ {
				if err := st.AppendTurn(ctx(t), id, Turn(n), sim.StatusActive); err != nil {
					errs <- fmt.Errorf("%s turn %d: %w", id, n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := make([]sim.TurnRecord, turns)
	for n := range want {
		want[n] = Turn(n + 1)
	}
	for i := range sessions {
		_, got := mustLoad(t, st, fmt.Sprintf("s_conc_%02d", i))
		sameTurns(t, got, want)
	}
}

func resultAppender(t *testing.T, open Factory) {
	st, _ := openOne(t, open)
	ra, ok := st.(sim.ResultAppender)
	if !ok {
		t.Skip("the store does not implement sim.ResultAppender")
	}
	s := Session("s_result")
	if err := st.CreateSession(ctx(t), s, nil); err != nil {
		t.Fatal(err)
	}
	tr := Turn(1)
	enc, err := sim.EncodeResult(&tr.Result)
	if err != nil {
		t.Fatal(err)
	}
	if err := ra.AppendTurnResult(ctx(t), s.ID, tr, enc, sim.StatusActive); err != nil {
		t.Fatal(err)
	}
	_, turns := mustLoad(t, st, s.ID)
	sameTurns(t, turns, []sim.TurnRecord{tr})
}
