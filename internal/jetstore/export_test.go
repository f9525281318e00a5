package jetstore

import (
	"context"
	"time"

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
