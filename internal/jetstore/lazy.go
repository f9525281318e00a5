package jetstore

import (
	"context"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// The facts stream and the groups bucket are opened on first use, not by
// New: each replicated stream or bucket is a RAFT group whose leader
// heartbeats its followers four times a second on every node (the
// embedded servers' clock, internal/natsserver), so a cluster whose worlds
// have no facts section and whose clients send no group_key would pay for
// two groups it never uses. The first use creates the stream or bucket
// when no node has yet (or opens the one another node created: creation
// is idempotent), and a failed open is tried again by the next use rather
// than remembered.

// lazy is a stream or bucket opened on first use. Concurrent first uses
// wait for one open, each only as long as its own context lets it; a
// failed open leaves the next use to try again.
type lazy[T any] struct {
	v    atomic.Pointer[T]
	turn chan struct{} // holds a token while an open is under way
}

func newLazy[T any]() *lazy[T] { return &lazy[T]{turn: make(chan struct{}, 1)} }

// get returns the opened value, opening it with open (under the store's
// retries) if no call has yet.
func (l *lazy[T]) get(ctx context.Context, open func(context.Context) (T, error)) (T, error) {
	if v := l.v.Load(); v != nil {
		return *v, nil
	}
	select {
	case l.turn <- struct{}{}:
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
	defer func() { <-l.turn }()
	if v := l.v.Load(); v != nil { // another call opened it meanwhile
		return *v, nil
	}
	v, err := open(ctx)
	if err != nil {
		return v, err
	}
	l.v.Store(&v)
	return v, nil
}

// factsStream is the ledgers' stream, created when missing.
func (s *Store) factsStream(ctx context.Context) (jetstream.Stream, error) {
	return s.facts.get(ctx, func(ctx context.Context) (st jetstream.Stream, err error) {
		err = s.retryFor(ctx, s.factsWait(), func(ctx context.Context) (err error) {
			st, err = s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
				Name:        s.o.FactsStream,
				Description: "agentworld fictional worlds' ledgers, one subject per world",
				Subjects:    []string{s.o.FactsPrefix + ">"},
				Storage:     jetstream.FileStorage,
				Replicas:    s.o.Replicas,
				Retention:   jetstream.LimitsPolicy,
			})
			return err
		})
		return st, unavailable(err)
	})
}

// groupsBucket is the reset groups' bucket, created when missing.
func (s *Store) groupsBucket(ctx context.Context) (jetstream.KeyValue, error) {
	return s.groups.get(ctx, func(ctx context.Context) (kv jetstream.KeyValue, err error) {
		err = s.retry(ctx, func(ctx context.Context) (err error) {
			kv, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket: s.o.GroupsBucket, Description: "agentworld reset groups' root sessions", History: 1,
				TTL: s.o.GroupTTL, Storage: jetstream.FileStorage, Replicas: s.o.Replicas,
			})
			return err
		})
		return kv, unavailable(err)
	})
}
