package natsconn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRetry: fn is called until it succeeds, each call with its own
// deadline; when the context ends first, fn's last error comes back.
func TestRetry(t *testing.T) {
	calls := 0
	err := Retry(context.Background(), time.Minute, func(ctx context.Context) error {
		calls++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("a call without a deadline")
		}
		if calls < 3 {
			return errors.New("JetStream not available")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Retry: %v after %d calls, want nil after 3", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = Retry(ctx, time.Minute, func(context.Context) error {
		calls++
		if calls == 2 {
			cancel()
		}
		return errors.New("still forming")
	})
	if err == nil || err.Error() != "still forming" {
		t.Fatalf("Retry after cancel: %v, want the last error", err)
	}
}

// TestDialNamesTheURL: a server that is not there fails with its address
// in the error.
func TestDialNamesTheURL(t *testing.T) {
	_, err := Dial("nats://127.0.0.1:1", "test")
	if err == nil || !strings.Contains(err.Error(), "nats://127.0.0.1:1") {
		t.Fatalf("Dial: %v", err)
	}
}

// TestRetryGrowing: a call whose attempt gets no answer (a stream
// creation whose reply went to another process) is made again with a longer
// deadline, and one that fails at once is made again after a pause,
// until it succeeds; when the caller's context ends, the last error
// comes back.
func TestRetryGrowing(t *testing.T) {
	var budgets []time.Duration
	err := RetryGrowing(t.Context(), func(ctx context.Context) error {
		d, ok := ctx.Deadline()
		if !ok {
			t.Fatal("an attempt without a deadline")
		}
		budgets = append(budgets, time.Until(d))
		switch len(budgets) {
		case 1:
			<-ctx.Done() // no answer
			return ctx.Err()
		case 2:
			return errors.New("JetStream not available")
		}
		return nil
	})
	if err != nil || len(budgets) != 3 {
		t.Fatalf("%v after %d attempts; want success after 3", err, len(budgets))
	}
	if budgets[0] > firstGrowingAttempt || budgets[1] <= firstGrowingAttempt {
		t.Fatalf("attempt deadlines %v: want the first at most %v and the second longer", budgets, firstGrowingAttempt)
	}
	ctx, cancel := context.WithCancel(t.Context())
	refused := errors.New("refused")
	err = RetryGrowing(ctx, func(context.Context) error { cancel(); return refused })
	if !errors.Is(err, refused) {
		t.Fatalf("after the context ended: %v; want the call's own error", err)
	}
}
