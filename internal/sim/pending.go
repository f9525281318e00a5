package sim

import (
	"maps"
	"time"
)

// pendingTTL is how long a step whose turn the store did not take is
// kept for a retry of it.
const pendingTTL = time.Minute

// pendingTurn is a computed step on its way to the store: the request
// that asked for it, what the step made of it, and, once its append has
// failed for want of an answer (ErrStoreUnavailable: a shared store
// electing a leader), until when it waits for the client's retry. The
// turn was never acknowledged, so answering the retry with it is the
// first request's answer arriving late: the world model is not asked the
// same question again (nor a judge, nor the hooks' BeforeStep).
type pendingTurn struct {
	turn   int
	req    StepRequest // the request (its Action bytes as sent)
	f      *stepFrame
	ht     HistoryTurn
	status string
	enc    []byte // the encoded result, once made
	until  time.Time
}

// matches reports whether req asks for exactly p's turn again.
func (p *pendingTurn) matches(req *StepRequest, turn int) bool {
	return p.turn == turn && string(p.req.Action) == string(req.Action) && p.req.Control == req.Control &&
		p.req.WorldState == req.WorldState && maps.Equal(p.req.Labels, req.Labels)
}

// takePending returns the session's pending turn if req asks for it
// again while it is kept, and forgets it either way. The caller holds
// the session's step lock.
func (s *session) takePending(req *StepRequest, turn int, now time.Time) *pendingTurn {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending
	s.pending = nil
	if p == nil || !now.Before(p.until) || !p.matches(req, turn) {
		return nil
	}
	return p
}
