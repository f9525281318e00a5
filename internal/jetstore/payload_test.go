package jetstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store/storetest"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// TestEntryOverMaxPayload: on a NATS server whose messages hold less
// than a session's entry (a stock server holds 1 MiB; a turn with a long
// observation, or a fork's first message with every inherited turn, can
// be more), the write fails with sim.ErrTooLarge naming max_payload, and
// the session goes on with the next turn that fits.
func TestEntryOverMaxPayload(t *testing.T) {
	const limit = 16 << 10
	nc, err := nats.Connect(natstest.StartWith(t, &natstest.Options{MaxPayload: limit}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st := open(t, nc, nil)
	ctx := t.Context()
	huge := storetest.Turn(1)
	huge.Observation = strings.Repeat("o", 2*limit)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, sim.ErrTooLarge) || !strings.Contains(err.Error(), "max_payload of 16384 bytes") {
			t.Errorf("%s: %v; want sim.ErrTooLarge naming max_payload", what, err)
		}
	}
	check("a fork's first message", st.CreateSession(ctx, storetest.Session("s_fork"), []sim.TurnRecord{huge}))
	if err := st.CreateSession(ctx, storetest.Session("s_x"), nil); err != nil {
		t.Fatal(err)
	}
	check("a turn", st.AppendTurn(ctx, "s_x", huge, sim.StatusActive))
	if err := st.AppendTurn(ctx, "s_x", storetest.Turn(1), sim.StatusActive); err != nil {
		t.Fatalf("the next turn: %v", err)
	}
	if _, turns, err := st.LoadSession(ctx, "s_x"); err != nil || len(turns) != 1 {
		t.Errorf("session after the refused turn: %d turns, %v; want 1", len(turns), err)
	}
	// A fictional world's ledger batch is one message too.
	big := []fiction.Fact{{Entity: "e", Attribute: "a", Value: strings.Repeat("v", 2*limit), Source: fiction.SourceObservation}}
	check("a ledger batch", st.AppendFacts(ctx, "w", big))
	if facts, err := st.WorldFacts(ctx, "w"); err != nil || len(facts) != 0 {
		t.Errorf("ledger after the refused batch: %v, %v; want none", facts, err)
	}
}
