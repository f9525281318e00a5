package jetstore

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// OnGroupWait makes s call f whenever a GroupRoot call starts waiting for
// another call's claim of reset group key.
func OnGroupWait(s *Store, f func(key string)) { s.onWait = f }

// LoseAcks makes the first n appends of s store their message but fail
// as if its acknowledgement never came.
func LoseAcks(s *Store, n int) {
	pub := s.pub
	s.pub = func(ctx context.Context, subj string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
		ack, err := pub(ctx, subj, data, opts...)
		if err == nil && n > 0 {
			n--
			return nil, context.DeadlineExceeded
		}
		return ack, err
	}
}

// LoseAckThen makes the next append of s store its message, run then
// (another writer appending after it), and fail as if its
// acknowledgement never came.
func LoseAckThen(s *Store, then func()) {
	pub := s.pub
	lost := false
	s.pub = func(ctx context.Context, subj string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
		ack, err := pub(ctx, subj, data, opts...)
		if err == nil && !lost {
			lost = true
			then()
			return nil, context.DeadlineExceeded
		}
		return ack, err
	}
}

// RefuseInProcess makes the next n appends of s refused, unstored, as
// nats-server refuses one whose subject's message before is still being
// applied (JSErrCodeStreamWrongLastSequenceConstant), as it can right
// after acknowledging that message.
func RefuseInProcess(s *Store, n int) {
	pub := s.pub
	s.pub = func(ctx context.Context, subj string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
		if n > 0 {
			n--
			return nil, &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Description: "wrong last sequence"}
		}
		return pub(ctx, subj, data, opts...)
	}
}

// SetHeartbeatsHealthy makes s's heartbeats look failing (false) or
// successful for long (true), as judge sees them.
func SetHeartbeatsHealthy(s *Store, healthy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !healthy {
		s.own.upSince = time.Time{}
		return
	}
	s.own.beatAt = time.Now()
	s.own.upSince = s.own.beatAt.Add(-time.Hour)
}

// ApplyLate makes the next append of s go as on a loaded replicated
// stream whose leader applies its message late: the first attempt gets no
// answer in time, the next is refused because the subject's message is
// still in process (JSErrCodeStreamWrongLastSequenceConstant), and the
// message is stored only as the attempt after that arrives.
func ApplyLate(s *Store) {
	pub := s.pub
	n := 0
	s.pub = func(ctx context.Context, subj string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
		n++
		switch n {
		case 1:
			return nil, context.DeadlineExceeded
		case 2:
			return nil, &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Description: "wrong last sequence"}
		case 3:
			if _, err := pub(ctx, subj, data, opts...); err != nil { // the first attempt's, applied now
				return nil, err
			}
		}
		return pub(ctx, subj, data, opts...)
	}
}

// slowLastRead is a stream whose first n reads of a subject's last
// message get no answer in time.
type slowLastRead struct {
	jetstream.Stream
	n int
}

func (s *slowLastRead) GetLastMsgForSubject(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	if s.n > 0 {
		s.n--
		return nil, context.DeadlineExceeded
	}
	return s.Stream.GetLastMsgForSubject(ctx, subj)
}

// SlowLastReads makes the next n reads of a subject's last message by s
// get no answer in time, as on a loaded machine.
func SlowLastReads(s *Store, n int) { s.stream = &slowLastRead{Stream: s.stream, n: n} }

// Batching reports whether s commits concurrent appends in batches.
func Batching(s *Store) bool { return s.batch != nil && !s.batch.off.Load() }

// NoBatching makes s publish every append alone.
func NoBatching(s *Store) { s.batch = nil }

// Batches is how many batches of two or more appends s sent, and how many
// of them were refused or not answered.
func Batches(s *Store) (sent, failed int64) { return s.batch.sent.Load(), s.batch.failed.Load() }

// PatientBatches makes s wait a minute for a batch's acknowledgement
// (two seconds otherwise), so that on a loaded machine a test's batch is
// not made again append by append for want of an answer.
func PatientBatches(s *Store) { s.batch.wait = time.Minute }

// BatchedAppends is how many appends s sent in batches.
func BatchedAppends(s *Store) int64 { return s.batch.carried.Load() }

// QueuedAppends is how many appends of s wait for the next batch.
func QueuedAppends(s *Store) int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.queue)
}

// HoldAppend makes the next append s publishes alone wait, once it has
// been sent to the publish, until release is called; entered is closed
// when it waits.
func HoldAppend(s *Store) (entered <-chan struct{}, release func()) {
	pub := s.pub
	in, out := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.pub = func(ctx context.Context, subj string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
		held := false
		once.Do(func() { held = true })
		if held {
			close(in)
			<-out
		}
		return pub(ctx, subj, data, opts...)
	}
	return in, func() { close(out) }
}

// BeforeBatchCommit makes s call f before it sends each batch's last
// message.
func BeforeBatchCommit(s *Store, f func()) {
	commit := s.batch.commit
	s.batch.commit = func(ctx context.Context, m *nats.Msg) (*nats.Msg, error) {
		f()
		return commit(ctx, m)
	}
}

// LoseBatchAcks makes the next n batches of s stored but unanswered, as
// if their acknowledgement never came.
func LoseBatchAcks(s *Store, n int) {
	commit := s.batch.commit
	s.batch.commit = func(ctx context.Context, m *nats.Msg) (*nats.Msg, error) {
		r, err := commit(ctx, m)
		if err == nil && n > 0 {
			n--
			return nil, nats.ErrTimeout
		}
		return r, err
	}
}

// unansweredReads is a stream whose next reads of a subject's last
// message (last of them) and of a message by sequence (msgs of them) get
// no answer in time.
type unansweredReads struct {
	jetstream.Stream
	mu         sync.Mutex
	last, msgs int
}

func (s *unansweredReads) fail(n *int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *n <= 0 {
		return false
	}
	*n--
	return true
}

func (s *unansweredReads) GetLastMsgForSubject(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	if s.fail(&s.last) {
		return nil, context.DeadlineExceeded
	}
	return s.Stream.GetLastMsgForSubject(ctx, subj)
}

func (s *unansweredReads) GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	if s.fail(&s.msgs) {
		return nil, context.DeadlineExceeded
	}
	return s.Stream.GetMsg(ctx, seq, opts...)
}

// UnansweredReads makes the next last reads of a subject's last message
// and msgs reads of a message by sequence go unanswered, on the
// transcript stream and (once a ledger call opened it) the facts stream
// alike.
func UnansweredReads(s *Store, last, msgs int) {
	s.stream = &unansweredReads{Stream: s.stream, last: last, msgs: msgs}
	if st := s.facts.v.Load(); st != nil {
		var w jetstream.Stream = &unansweredReads{Stream: *st, last: last, msgs: msgs}
		s.facts.v.Store(&w)
	}
}

// LapseLease makes s look as if it had not renewed its lease for a whole
// lease (a node paused past it), without touching the nodes bucket: its
// own sessions are no longer trusted to be its own (ownedHere).
func LapseLease(s *Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.own.beatAt = time.Now().Add(-s.o.Lease)
}

// Heartbeat renews s's lease now, as its next heartbeat would.
func Heartbeat(ctx context.Context, s *Store) error { return s.heartbeat(ctx) }

// frozenOwners is an owners bucket whose reads of one key answer one
// entry whatever the bucket holds.
type frozenOwners struct {
	jetstream.KeyValue
	key   string
	entry jetstream.KeyValueEntry
}

func (f *frozenOwners) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if key == f.key {
		return f.entry, nil
	}
	return f.KeyValue.Get(ctx, key)
}

// FreezeOwnerReads makes every later read by s of session id's owner
// record answer the record as it is now, as a replica of the owners
// bucket that stopped following its leader does (a paused node's own
// server, which answers that node's reads first). Writes, and reads from
// the bucket's leader, still see the bucket.
func FreezeOwnerReads(ctx context.Context, s *Store, id string) error {
	e, err := s.owners.Get(ctx, key(id))
	if err != nil {
		return err
	}
	s.owners = &frozenOwners{KeyValue: s.owners, key: key(id), entry: e}
	return nil
}
