package jetstore

import (
	"fmt"
	"time"
)

// Ready reports whether this node can serve its sessions now: its lease
// was renewed within the time it trusts a renewal (two thirds of a
// lease). A node whose heartbeats fail cannot write (its store has lost
// its servers' quorum, or cannot reach them) and must not be sent
// requests it will only refuse, so a readiness probe asks this; it reads
// no bucket, only when the last heartbeat succeeded. A store opened
// without a node name (no lease of its own) is always ready.
func (s *Store) Ready() error {
	if s.o.Node == "" {
		return nil
	}
	s.mu.Lock()
	beat := s.own.beatAt
	s.mu.Unlock()
	if beat.IsZero() {
		return fmt.Errorf("node %s has not renewed its lease yet", s.o.Node)
	}
	if d := time.Since(beat); d >= s.trusted() {
		return fmt.Errorf("node %s last renewed its lease %s ago, past the %s it trusts a renewal for: its NATS servers cannot be reached or have no quorum",
			s.o.Node, d.Round(time.Millisecond), s.trusted().Round(time.Millisecond))
	}
	return nil
}
