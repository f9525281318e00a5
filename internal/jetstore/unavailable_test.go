package jetstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/sim"
)

// TestUnavailableMarksOnlyTransientErrors: a cluster that does not answer
// (the "no response from stream" of a stream whose leader died, seen in
// the three-node kill test as a 500) is a retryable ErrStoreUnavailable;
// a refusal keeps its own meaning.
func TestUnavailableMarksOnlyTransientErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{jetstream.ErrNoStreamResponse, true},
		{nats.ErrNoResponders, true},
		{nats.ErrTimeout, true},
		{fmt.Errorf("store session s_1 turn: %w", jetstream.ErrNoStreamResponse), true},
		{&jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, false},
		{sim.ErrMoved, false},
		{sim.ErrNotFound, false},
		{errors.New("encode: bad"), false},
	} {
		got := unavailable(tc.err)
		if errors.Is(got, sim.ErrStoreUnavailable) != tc.want {
			t.Errorf("unavailable(%v) = %v; want ErrStoreUnavailable: %v", tc.err, got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("unavailable(%v) = %v lost the cause", tc.err, got)
		}
	}
	if unavailable(nil) != nil {
		t.Error("unavailable(nil) != nil")
	}
}
