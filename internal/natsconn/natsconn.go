// Package natsconn is how agentworld's processes reach NATS: [Dial] makes
// a connection that reconnects for as long as it is open, and [Retry]
// repeats a setup call while a cluster that is still forming answers
// "JetStream not available". The work queues (workqueue) and serve's
// cluster wiring (app) share them; the session store (jetstore) retries
// its set-up under deadlines of its own (its retry.go).
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
// each next one, up to 2 s; it returns fn's last error when ctx ends.
func Retry(ctx context.Context, per time.Duration, fn func(context.Context) error) error {
	wait := 100 * time.Millisecond
	for {
		call, cancel := context.WithTimeout(ctx, per)
		err := fn(call)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}
