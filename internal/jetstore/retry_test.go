package jetstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/sim"
)

// TestRetry: a call the cluster does not answer (no responder, an
// attempt past its own deadline) is tried again, each attempt under a
// deadline, until it succeeds; a refusal comes back at once; when the
// store's Wait runs out the last cause comes back as ErrStoreUnavailable;
// when the caller's context ends, its error does.
func TestRetry(t *testing.T) {
	s := &Store{o: Options{Wait: time.Minute}}
	ctx := t.Context()
	n := 0
	err := s.retry(ctx, func(ctx context.Context) error {
		n++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("an attempt without a deadline")
		}
		switch n {
		case 1:
			return jetstream.ErrNoStreamResponse // a stream without a leader
		case 2:
			<-ctx.Done() // no answer at all
			return ctx.Err()
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("retry: %v after %d attempts, want nil after 3", err, n)
	}

	refused := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}
	n = 0
	err = s.retry(ctx, func(context.Context) error { n++; return refused })
	if !errors.Is(err, refused) || errors.Is(err, sim.ErrStoreUnavailable) || n != 1 {
		t.Fatalf("retry of a refusal: %v after %d attempts, want the refusal after 1", err, n)
	}

	short := &Store{o: Options{Wait: 100 * time.Millisecond}}
	err = short.retry(ctx, func(context.Context) error { return jetstream.ErrNoStreamResponse })
	if !errors.Is(err, sim.ErrStoreUnavailable) || !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("retry past Wait: %v, want ErrStoreUnavailable with its cause", err)
	}
	err = short.retry(ctx, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	if !errors.Is(err, sim.ErrStoreUnavailable) {
		t.Fatalf("retry of calls nobody answers, past Wait: %v, want ErrStoreUnavailable", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	err = s.retry(cctx, func(context.Context) error { cancel(); return jetstream.ErrNoStreamResponse })
	if errors.Is(err, sim.ErrStoreUnavailable) || cctx.Err() == nil {
		t.Fatalf("retry after the caller gave up: %v, want the attempt's own error", err)
	}
}
