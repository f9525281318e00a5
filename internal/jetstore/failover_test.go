package jetstore_test

import (
	"errors"
	"testing"

	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store/storetest"
)

// TestAppendAfterLostAck: an append whose message was stored but whose
// acknowledgement never came (a leader that died after storing it, a
// loaded server) is tried again and recognised as this store's own
// message: the step is recorded once and not reported as moved.
func TestAppendAfterLostAck(t *testing.T) {
	nc := serve(t)
	ctx := t.Context()
	st := open(t, nc, nil)
	rec := storetest.Session("s_ack")
	jetstore.LoseAcks(st, 1)
	if err := st.CreateSession(ctx, rec, nil); err != nil {
		t.Fatalf("create with a lost ack: %v", err)
	}
	jetstore.LoseAcks(st, 1)
	turn := sim.TurnRecord{Turn: 1, HistoryTurn: sim.HistoryTurn{Action: "ls", Observation: "a b"}}
	if err := st.AppendTurn(ctx, rec.ID, turn, sim.StatusActive); err != nil {
		t.Fatalf("append with a lost ack: %v", err)
	}
	turn2 := sim.TurnRecord{Turn: 2, HistoryTurn: sim.HistoryTurn{Action: "pwd", Observation: "/"}}
	if err := st.AppendTurn(ctx, rec.ID, turn2, sim.StatusActive); err != nil {
		t.Fatalf("the next append: %v", err)
	}
	_, turns, err := open(t, nc, nil).LoadSession(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 2 || turns[0].Action != "ls" || turns[1].Action != "pwd" {
		t.Fatalf("transcript %+v, want ls then pwd once each", turns)
	}
}

// TestAppendAfterInProcessRefusal: an append refused because the
// subject's message before is still being applied (nats-server can
// acknowledge a message before it clears that mark) is asked again until
// the check can be made, instead of reaching the client as a moved
// session; a message of another writer is still refused after it.
func TestAppendAfterInProcessRefusal(t *testing.T) {
	nc := serve(t)
	ctx := t.Context()
	st := open(t, nc, nil)
	rec := storetest.Session("s_inproc")
	if err := st.CreateSession(ctx, rec, nil); err != nil {
		t.Fatal(err)
	}
	jetstore.RefuseInProcess(st, 2)
	turn := sim.TurnRecord{Turn: 1, HistoryTurn: sim.HistoryTurn{Action: "ls", Observation: "a b"}}
	if err := st.AppendTurn(ctx, rec.ID, turn, sim.StatusActive); err != nil {
		t.Fatalf("append refused twice as in process: %v", err)
	}
	other := open(t, nc, nil)
	if err := other.AppendTurn(ctx, rec.ID, sim.TurnRecord{Turn: 2, HistoryTurn: sim.HistoryTurn{Action: "pwd"}}, sim.StatusActive); err != nil {
		t.Fatal(err)
	}
	jetstore.RefuseInProcess(st, 1)
	err := st.AppendTurn(ctx, rec.ID, sim.TurnRecord{Turn: 2, HistoryTurn: sim.HistoryTurn{Action: "cd"}}, sim.StatusActive)
	if !errors.Is(err, sim.ErrMoved) {
		t.Fatalf("append after another writer's: %v, want sim.ErrMoved", err)
	}
	_, turns, err := open(t, nc, nil).LoadSession(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 2 || turns[0].Action != "ls" || turns[1].Action != "pwd" {
		t.Fatalf("transcript %+v, want ls then pwd once each", turns)
	}
}

// TestAppendAppliedLate: on a loaded replicated stream, an append whose
// first attempt timed out is refused while the leader still applies that
// attempt's message (JSErrCodeStreamWrongLastSequenceConstant). The
// refusal is waited out, then the message is recognised as this store's
// own: a create is not reported as a taken session id (it was: 409
// session_exists for a create that had succeeded) nor a turn as moved.
// So is a create whose look at its own message timed out.
func TestAppendAppliedLate(t *testing.T) {
	nc := serve(t)
	ctx := t.Context()
	st := open(t, nc, nil)
	rec := storetest.Session("s_late")
	jetstore.ApplyLate(st)
	if err := st.CreateSession(ctx, rec, nil); err != nil {
		t.Fatalf("create applied late: %v", err)
	}
	jetstore.ApplyLate(st)
	turn := sim.TurnRecord{Turn: 1, HistoryTurn: sim.HistoryTurn{Action: "ls", Observation: "a b"}}
	if err := st.AppendTurn(ctx, rec.ID, turn, sim.StatusActive); err != nil {
		t.Fatalf("append applied late: %v", err)
	}
	// The look at the subject's last message, on a loaded machine, can
	// outlive its attempt too: it is made again.
	jetstore.LoseAcks(st, 1)
	jetstore.SlowLastReads(st, 1)
	rec2 := storetest.Session("s_slow")
	if err := st.CreateSession(ctx, rec2, nil); err != nil {
		t.Fatalf("create whose own-message check timed out: %v", err)
	}
	_, turns, err := open(t, nc, nil).LoadSession(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 1 || turns[0].Action != "ls" {
		t.Fatalf("transcript %+v, want ls once", turns)
	}
}

// TestNoJudgingWhileOwnLeaseFails: a node whose own heartbeats fail (the
// nodes bucket electing a leader, when every key expires, the live
// nodes' too) does not take another node's missing lease for its death:
// its owner lookup is a retryable ErrStoreUnavailable. Once its own
// heartbeats have succeeded a while, the missing lease means a dead
// owner.
func TestNoJudgingWhileOwnLeaseFails(t *testing.T) {
	nc := serve(t)
	ctx := t.Context()
	a := open(t, nc, &jetstore.Options{Node: "a", Addr: "http://a", Lease: testLease})
	b := open(t, nc, &jetstore.Options{Node: "b", Addr: "http://b", Lease: testLease})
	t.Cleanup(func() { _ = b.Close() })
	if err := a.CreateSession(ctx, storetest.Session("s_judge"), nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil { // a's key is gone, as an expired one is
		t.Fatal(err)
	}
	waitOwnerDead(t, b, "s_judge") // b has seen the key go
	b.Forget("s_judge")
	jetstore.SetHeartbeatsHealthy(b, false)
	l, err := b.Owner(ctx, "s_judge")
	if !errors.Is(err, jetstore.ErrCannotJudge) || !errors.Is(err, sim.ErrStoreUnavailable) {
		t.Fatalf("owner seen by a node whose heartbeats fail = %+v, %v; want ErrCannotJudge (store unavailable)", l, err)
	}
	jetstore.SetHeartbeatsHealthy(b, true)
	if l, err = b.Owner(ctx, "s_judge"); err != nil || l.Node != "a" || l.Alive {
		t.Fatalf("owner seen by a healthy node = %+v, %v; want a, dead", l, err)
	}
}

// TestPausedOwnerServesNoStaleCopy: a node paused past its lease, whose
// session another node may have taken over meanwhile, does not answer
// for the session as its owner on the word of its own server's replica of
// the owners bucket, which a pause leaves behind (here frozen as it was
// before the pause). Until it renews its lease it answers store
// unavailable (the client retries); after, it finds the session's new
// owner, or, when nobody took the session, that it is still its own.
func TestPausedOwnerServesNoStaleCopy(t *testing.T) {
	cases := []struct {
		name      string
		takenOver bool // node b took the session over during the pause
		renewed   bool // node a's heartbeat renewed its lease since
		// wantNode is the owner a reports, alive; "" means ErrLeaseLapsed
		wantNode string
	}{
		{name: "LapsedTakenOver", takenOver: true},
		{name: "LapsedKept"},
		{name: "RenewedTakenOver", takenOver: true, renewed: true, wantNode: "b"},
		{name: "RenewedKept", renewed: true, wantNode: "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := serve(t)
			ctx := t.Context()
			a := open(t, nc, &jetstore.Options{Node: "a", Addr: "http://a", Lease: testLease})
			b := open(t, nc, &jetstore.Options{Node: "b", Addr: "http://b", Lease: testLease})
			t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
			const id = "s_paused"
			if err := a.CreateSession(ctx, storetest.Session(id), nil); err != nil {
				t.Fatal(err)
			}
			before, err := a.Owner(ctx, id)
			if err != nil || before.Node != "a" || !before.Alive {
				t.Fatalf("a's own session before the pause = %+v, %v", before, err)
			}
			if err := jetstore.FreezeOwnerReads(ctx, a, id); err != nil {
				t.Fatal(err)
			}
			jetstore.LapseLease(a)
			if tc.takenOver {
				if err := b.Claim(ctx, id, before); err != nil {
					t.Fatalf("b's takeover: %v", err)
				}
			}
			if tc.renewed {
				if err := jetstore.Heartbeat(ctx, a); err != nil {
					t.Fatal(err)
				}
			}
			l, err := a.Owner(ctx, id)
			if tc.wantNode == "" {
				if !errors.Is(err, jetstore.ErrLeaseLapsed) || !errors.Is(err, sim.ErrStoreUnavailable) {
					t.Fatalf("owner seen by a before it renewed its lease = %+v, %v; want ErrLeaseLapsed (store unavailable)", l, err)
				}
				return
			}
			if err != nil || l.Node != tc.wantNode || !l.Alive || l.Addr != "http://"+tc.wantNode {
				t.Fatalf("owner seen by a after it renewed its lease = %+v, %v; want %s, alive", l, err, tc.wantNode)
			}
			// what a learnt holds: it answers the same again
			if again, err := a.Owner(ctx, id); err != nil || again != l {
				t.Fatalf("owner seen by a again = %+v, %v; want %+v", again, err, l)
			}
		})
	}
}
