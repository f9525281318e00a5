package natsconn

import (
	"context"
	"time"
)

// Backoff is the timing of a call tried again while NATS does not answer
// it: [Retry], [RetryGrowing] and the session store's calls (jetstore)
// are each one Backoff with constants of their own.
type Backoff struct {
	// First is the deadline of the first attempt; each later one's is
	// Step longer (zero: all are First), up to Last (zero: no cap).
	First, Step, Last time.Duration
	// Pause follows the first failed attempt; each later pause is twice
	// the one before, up to LastPause (zero: no cap).
	Pause, LastPause time.Duration
	// AgainAtOnce: an attempt that ran out of its own deadline (nobody
	// answered) is followed by the next one at once, without a pause and
	// without growing it; false pauses after it as after any failure.
	AgainAtOnce bool
	// Wait bounds the attempts and pauses together, as well as ctx's
	// deadline does: no attempt runs past it, and no pause ends at or
	// after it; zero means until ctx ends.
	Wait time.Duration
	// Retryable reports whether a failure that came before the attempt's
	// deadline is worth another attempt (an attempt nobody answered
	// always is); nil means every failure is.
	Retryable func(error) bool
}

// Do calls fn, each attempt under its own deadline, until it succeeds,
// fails for a reason Retryable refuses, or ctx or Wait ends; it returns
// fn's last error (nil on success). fn must be safe to repeat.
func (b Backoff) Do(ctx context.Context, fn func(context.Context) error) error {
	var end time.Time
	if b.Wait > 0 {
		end = time.Now().Add(b.Wait)
	}
	if d, ok := ctx.Deadline(); ok && (end.IsZero() || d.Before(end)) {
		end = d
	}
	pause := b.Pause
	for n := 0; ; n++ {
		per := b.First + time.Duration(n)*b.Step
		if b.Last > 0 {
			per = min(per, b.Last)
		}
		due := time.Now().Add(per)
		if !end.IsZero() && due.After(end) {
			due = end
		}
		call, cancel := context.WithDeadline(ctx, due)
		err := fn(call)
		timedOut := call.Err() != nil
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return err
		case !timedOut && b.Retryable != nil && !b.Retryable(err):
			return err
		}
		wait := pause
		if timedOut && b.AgainAtOnce {
			wait = 0
		}
		if !end.IsZero() && !time.Now().Add(wait).Before(end) {
			return err
		}
		if wait == 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		pause *= 2
		if b.LastPause > 0 {
			pause = min(pause, b.LastPause)
		}
	}
}
