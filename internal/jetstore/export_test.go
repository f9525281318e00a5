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
