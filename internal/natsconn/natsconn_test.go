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
