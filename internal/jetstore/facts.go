package jetstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/fiction"
)

// Fictional worlds' ledgers (internal/fiction) are kept in the stream
// Options.FactsStream, one subject per world (Options.FactsPrefix and
// the world's name, base64url-encoded), one message per batch of facts a
// step recorded. The store is a [fiction.PositionAppender]: every node's
// ledger reads what the others appended before it uses a world, and
// appends at the position it read, so the nodes of a cluster share one
// ledger per world, and it outlives them as the
// transcripts do. The stream is created by the first node that uses a
// ledger (lazy.go).

// Defaults of [Options] for world ledgers.
const (
	DefaultFactsStream = "AGENTWORLD_FACTS"
	DefaultFactsPrefix = "agentworld.facts."
)

var _ fiction.PositionAppender = (*Store)(nil)

// factsWait bounds how long each read or conditional append of a ledger
// call keeps trying while the cluster does not answer, in place of
// Options.Wait when that is longer (a call of several reads may wait that
// long for each; an unconditional append, after a refused one, waits
// jetstream's 5 s at most). Ledgers are used inside steps
// (internal/worldhooks: before the model is asked, and after, under a
// context without deadline), and a step that cannot use its world's
// ledger runs without it, with a warning, rather than wait out the
// store's 10 s: 4 s outlasts an election of the embedded servers (at most
// 3 s, internal/natsserver) and is less than the 5 s one unanswered read
// waited for jetstream's default timeout before ledger reads were retried.
const factsWait = 4 * time.Second

func (s *Store) factsWait() time.Duration { return min(s.o.Wait, factsWait) }

func (s *Store) factsSubject(world string) string { return s.o.FactsPrefix + key(world) }

// AppendFacts implements fiction.Store: one message holding the batch.
func (s *Store) AppendFacts(ctx context.Context, world string, facts []fiction.Fact) error {
	data, err := json.Marshal(facts)
	if err != nil {
		return fmt.Errorf("encode ledger %s facts: %w", world, err)
	}
	if _, err := s.factsStream(ctx); err != nil {
		return fmt.Errorf("store ledger %s facts: %w", world, err)
	}
	if _, err := s.js.Publish(ctx, s.factsSubject(world), data, jetstream.WithExpectStream(s.o.FactsStream)); err != nil {
		return unavailable(s.overMaxPayload(fmt.Errorf("store ledger %s facts: %w", world, err), len(data)))
	}
	return nil
}

// AppendFactsAt implements fiction.PositionAppender: one message holding
// the batch, stored only if the world's subject's last message is at (its
// stream sequence; 0: it has none), as session appends are (putOne), and
// tried again while the stream does not answer, recognising its own
// message if an unanswered attempt stored it.
func (s *Store) AppendFactsAt(ctx context.Context, world string, at uint64, facts []fiction.Fact) (uint64, error) {
	data, err := json.Marshal(facts)
	if err != nil {
		return 0, fmt.Errorf("encode ledger %s facts: %w", world, err)
	}
	st, err := s.factsStream(ctx)
	if err != nil {
		return 0, fmt.Errorf("store ledger %s facts: %w", world, err)
	}
	pos, err := s.putTo(ctx, appendLog{st: st, name: s.o.FactsStream, wait: s.factsWait()}, s.factsSubject(world), data, at, false)
	if isWrongLastSequence(err) {
		return 0, fmt.Errorf("ledger %s: %w (%v)", world, fiction.ErrPositionMoved, err)
	}
	if err != nil {
		return 0, unavailable(s.overMaxPayload(fmt.Errorf("store ledger %s facts: %w", world, err), len(data)))
	}
	return pos, nil
}

// WorldFacts implements fiction.Store.
func (s *Store) WorldFacts(ctx context.Context, world string) ([]fiction.Fact, error) {
	facts, _, err := s.FactsAfter(ctx, world, 0)
	return facts, err
}

// FactsAfter implements fiction.Follower; a position is a stream
// sequence. A world with nothing new costs one read of its subject's last
// message.
func (s *Store) FactsAfter(ctx context.Context, world string, after uint64) ([]fiction.Fact, uint64, error) {
	st, err := s.factsStream(ctx)
	if err != nil {
		return nil, after, fmt.Errorf("read ledger %s: %w", world, err)
	}
	var out []fiction.Fact
	last, err := s.walk(ctx, st, s.factsSubject(world), after, s.factsWait(), "read ledger "+world, func(m *jetstream.RawStreamMsg) error {
		var batch []fiction.Fact
		if err := json.Unmarshal(m.Data, &batch); err != nil {
			return fmt.Errorf("ledger %s: message %d: %w", world, m.Sequence, err)
		}
		out = append(out, batch...)
		return nil
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, after, nil
	}
	if err != nil {
		return nil, after, err
	}
	return out, last, nil
}
