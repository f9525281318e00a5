package natsconn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBackoff: attempts run under deadlines that grow by Step up to Last;
// a failure Retryable refuses comes back at once, others are tried again
// until one succeeds or Wait runs out, and no attempt's deadline lies
// past Wait.
func TestBackoff(t *testing.T) {
	busy, refused := errors.New("no leader yet"), errors.New("refused")
	notRefused := func(err error) bool { return !errors.Is(err, refused) }
	for _, tc := range []struct {
		name string
		b    Backoff
		errs []error // the attempts' results; every later one fails busy
		// calls is how many attempts are made (0: as many as Wait allows)
		calls int
		err   error
		// caps are the attempts' deadlines as given (the budget an
		// attempt sees is at most its cap and, on any machine, more than
		// its cap less a minute)
		caps []time.Duration
	}{
		{name: "succeeds after failures", b: Backoff{First: time.Hour, Pause: time.Millisecond},
			errs: []error{busy, busy, nil}, calls: 3, caps: []time.Duration{time.Hour, time.Hour, time.Hour}},
		{name: "deadlines grow to Last", b: Backoff{First: time.Hour, Step: 2 * time.Hour, Last: 4 * time.Hour, Pause: time.Millisecond},
			errs: []error{busy, busy, busy, nil}, calls: 4, caps: []time.Duration{time.Hour, 3 * time.Hour, 4 * time.Hour, 4 * time.Hour}},
		{name: "a refusal comes back at once", b: Backoff{First: time.Hour, Pause: time.Millisecond, Retryable: notRefused},
			errs: []error{busy, refused, nil}, calls: 2, err: refused},
		{name: "Wait runs out", b: Backoff{First: time.Hour, Pause: 5 * time.Millisecond, Wait: 50 * time.Millisecond},
			err: busy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first time.Time // Do starts before its first attempt
			var budgets []time.Duration
			err := tc.b.Do(t.Context(), func(ctx context.Context) error {
				d, ok := ctx.Deadline()
				if !ok {
					t.Fatal("an attempt without a deadline")
				}
				if first.IsZero() {
					first = time.Now()
				}
				if tc.b.Wait > 0 && d.After(first.Add(tc.b.Wait)) {
					t.Errorf("attempt %d is due %v after the first began, past Wait %v", len(budgets)+1, d.Sub(first), tc.b.Wait)
				}
				budgets = append(budgets, time.Until(d))
				if n := len(budgets); n <= len(tc.errs) {
					return tc.errs[n-1]
				}
				return busy
			})
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("Do: %v, want %v", err, tc.err)
			}
			if tc.calls > 0 && len(budgets) != tc.calls {
				t.Fatalf("%d attempts, want %d", len(budgets), tc.calls)
			}
			if tc.caps == nil {
				return
			}
			var got []time.Duration
			for i, b := range budgets {
				if b <= tc.caps[i]-time.Minute || b > tc.caps[i] {
					got = append(got, b)
					continue
				}
				got = append(got, tc.caps[i])
			}
			if d := cmp.Diff(tc.caps, got); d != "" {
				t.Fatalf("attempt deadlines (-want +got):\n%s", d)
			}
		})
	}
}
