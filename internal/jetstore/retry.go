package jetstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/natsconn"
	"github.com/agentworld/agentworld/internal/sim"
)

// Waiting out a leader election. While a stream or key-value bucket has
// no leader (the embedded servers elect one 1.5 to 3 s after the old one
// died), a publish to it finds no responder at once and a request to its
// API gets no answer at all, so a call without a deadline used to wait
// out jetstream's 5 s default even when the election ended a moment
// after it was sent. Every store call that needs a leader is therefore
// tried again, each attempt under a short deadline, until it succeeds,
// fails for another reason, or Options.Wait (or the caller's deadline)
// runs out; then it fails with sim.ErrStoreUnavailable, which clients
// retry. Every call retried here is safe to repeat (see publish for the
// appends). Ledger calls (facts.go) wait at most factsWait, as steps use
// them; of them, AppendFacts (which a ledger uses after an AppendFactsAt
// was refused) is one publish that is not tried again, as a repeat could
// store its facts twice.
const (
	// DefaultWait is how long a store call waits for the cluster by
	// default: three times the longest election of the embedded servers.
	DefaultWait = 10 * time.Second
	// firstAttempt is the deadline of a call's first attempt, and each
	// later one's is attemptStep longer, up to lastAttempt: a healthy call
	// on a loaded machine that outlasts one is asked again, no worse off.
	firstAttempt = 500 * time.Millisecond
	attemptStep  = 250 * time.Millisecond
	lastAttempt  = 2 * time.Second
	// firstPause is the pause after a failed attempt, doubled after each
	// one up to lastPause: a publish to a stream without a leader fails
	// at once.
	firstPause = 20 * time.Millisecond
	lastPause  = 200 * time.Millisecond
)

// transient reports whether err says the cluster did not answer (a
// stream without a leader while RAFT elects one, a timeout, a connection
// being re-established) rather than refusing the request.
func transient(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, errInProcess) ||
		(errors.As(err, &api) && api.Code == 503)
}

// backoff is the timing of the store's calls; Wait is the store's.
var backoff = natsconn.Backoff{First: firstAttempt, Step: attemptStep, Last: lastAttempt,
	Pause: firstPause, LastPause: lastPause, Retryable: func(err error) bool {
		return errors.Is(err, sim.ErrStoreUnavailable) || transient(err)
	}}

// retry calls fn, each attempt under its own deadline, until it succeeds,
// fails other than transiently, or the store's Wait or ctx ends. A
// failure for want of an answer is returned marked
// sim.ErrStoreUnavailable; one because ctx ended is ctx's.
func (s *Store) retry(ctx context.Context, fn func(context.Context) error) error {
	return s.retryFor(ctx, s.o.Wait, fn)
}

// retryFor is retry for up to wait instead of the store's Wait.
func (s *Store) retryFor(ctx context.Context, wait time.Duration, fn func(context.Context) error) error {
	b := backoff
	b.Wait = wait
	err := b.Do(ctx, func(actx context.Context) error {
		due, _ := actx.Deadline()
		per := time.Until(due).Round(time.Millisecond)
		err := fn(actx)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// the attempt's own deadline: nobody answered in time
			return fmt.Errorf("%w: no answer in %v (%v)", sim.ErrStoreUnavailable, per, err)
		}
		return err
	})
	if err != nil && ctx.Err() == nil {
		return unavailable(err)
	}
	return err
}
