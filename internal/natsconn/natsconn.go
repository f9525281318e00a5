// Package natsconn is how agentworld's processes reach NATS: [Dial] makes
// a connection that reconnects for as long as it is open, and [Retry]
// repeats a setup call while a cluster that is still forming answers
// "JetStream not available", and [RetryGrowing] one that creates a stream
// or bucket other processes may be creating at the same moment; both are
// a [Backoff], the one retry loop whose timing each caller sets (the
// session store's calls are one more). The session store (jetstore), the
// work queues (workqueue) and serve's cluster wiring (app) share them.
package natsconn

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// Dial connects to the NATS server(s) at url (comma-separated
// nats://HOST:PORT addresses), reconnecting for as long as the connection
// is open. name labels the connection in the server's monitoring.
func Dial(url, name string) (*nats.Conn, error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.Name(name))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	return nc, nil
}

// Retry calls fn, each call bounded by per, until it succeeds or ctx
// ends, waiting 0.1 s after the first failure and twice as long after
// each next one, up to 2 s; it returns fn's last error when ctx ends, or
// sooner when ctx's deadline would pass during the next pause.
func Retry(ctx context.Context, per time.Duration, fn func(context.Context) error) error {
	return Backoff{First: per, Pause: 100 * time.Millisecond, LastPause: 2 * time.Second}.Do(ctx, fn)
}

// Creating a stream or bucket that other processes create at the same
// moment (nodes starting together, workers opening the jobs bucket) is
// answered once at most: nats-server's new stream leader answers the one
// request its assignment recorded, and the others get no answer at all
// (with three servers and one bucket created through each: R3, one
// answered; R1, none). Asked again, they find it made and are answered at
// once, so such calls are tried under deadlines that start short and
// grow (RetryGrowing), not under one long one that each of them waits
// out.
const (
	firstGrowingAttempt = time.Second
	lastGrowingAttempt  = 5 * time.Second
)

// growing is RetryGrowing's timing.
var growing = Backoff{First: firstGrowingAttempt, Step: time.Second, Last: lastGrowingAttempt,
	Pause: 100 * time.Millisecond, LastPause: 2 * time.Second, AgainAtOnce: true}

// RetryGrowing calls fn until it succeeds or ctx ends, each call under its
// own deadline, a second longer than the one before, from 1 s to 5 s; it
// asks again at once after a call that got no answer in time, and after
// one that failed it waits 0.1 s, twice as long after each next one, up
// to 2 s. It returns fn's last error when ctx ends, or sooner when ctx's
// deadline would pass during the next pause. fn must be safe to repeat (a
// create of an identical stream or bucket is).
func RetryGrowing(ctx context.Context, fn func(context.Context) error) error {
	return growing.Do(ctx, fn)
}
