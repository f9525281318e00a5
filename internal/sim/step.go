package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/world"
)

// StepRequest is one action for a session.
type StepRequest struct {
	// Action is the JSON value the client sent (a string or JSON).
	Action json.RawMessage
	// Turn, when > 0, makes the step idempotent: a turn already recorded
	// with the same action returns its stored result; the next turn is
	// simulated; anything else is ErrTurnConflict.
	Turn int
	// Control and WorldState go into this step's last user message only
	// (see StepInput).
	Control    string
	WorldState string
	// Labels are recorded with the step.
	Labels map[string]string
}

// acquire finds a session, loading it from the store when it is not held
// (after a restart, or once it ended), and counts a user so the reaper
// leaves it alone. Callers must call m.release. A private session is
// unknown to it (see CreateRequest.Private).
func (m *Manager) acquire(ctx context.Context, id string) (*session, error) {
	return m.acquireAs(ctx, id, false)
}

// acquireAs is acquire for sessions whose privacy is private: a private
// session is found only with private set, any other only without, and the
// other kind answers as unknown, so a client cannot even learn that a
// private id exists.
func (m *Manager) acquireAs(ctx context.Context, id string, private bool) (*session, error) {
	s, err := m.acquireAny(ctx, id, private)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	p := s.rec.Private
	s.mu.Unlock()
	if p != private {
		m.release(s)
		return nil, unknownSession(id)
	}
	return s, nil
}

func unknownSession(id string) error {
	return fielderr.New(ErrUnknownSession, "session_id", "no session %q", id)
}

func (m *Manager) acquireAny(ctx context.Context, id string, private bool) (*session, error) {
	m.mu.Lock()
	if err := m.enterLocked(); err != nil { // under the lookup's lock
		m.mu.Unlock()
		return nil, err
	}
	s := m.sessions[id]
	if s != nil {
		s.mu.Lock()
		s.users++
		s.lastUsed = m.opts.Now()
		s.mu.Unlock()
		m.mu.Unlock()
		return s, nil
	}
	m.mu.Unlock()
	rec, turns, err := m.store.LoadSession(ctx, id)
	if err != nil {
		m.inflight.Done()
		if errors.Is(err, ErrNotFound) {
			return nil, unknownSession(id)
		}
		return nil, fmt.Errorf("load session %s: %w", id, err)
	}
	if rec.Private != private { // not made resident for a request that cannot use it
		m.inflight.Done()
		return nil, unknownSession(id)
	}
	var spec world.Spec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		m.inflight.Done()
		return nil, fmt.Errorf("session %s: stored world spec: %w", id, err)
	}
	s = newSession(rec, &spec, turns, m.opts.Now())
	if rec.Inline != "" {
		s.compiled = spec.CompiledBytes()
	}
	s.users = 1
	if rec.Status != StatusActive {
		return s, nil // read-only view; never resident
	}
	m.mu.Lock()
	if held := m.sessions[id]; held != nil { // loaded concurrently
		held.mu.Lock()
		held.users++
		held.mu.Unlock()
		m.mu.Unlock()
		return held, nil
	}
	if len(m.sessions)+m.reserved >= m.opts.MaxSessions {
		m.mu.Unlock()
		m.inflight.Done()
		return nil, fmt.Errorf("%w: %d sessions open", ErrCapacity, len(m.sessions))
	}
	s.resident = true
	m.sessions[id] = s
	m.mu.Unlock()
	m.log.Info("session resumed from store", "session", id, "turns", len(turns))
	return s, nil
}

func (m *Manager) release(s *session) {
	s.mu.Lock()
	s.users--
	s.lastUsed = m.opts.Now()
	s.mu.Unlock()
	m.inflight.Done()
}

// lock takes the session's step lock, honouring ctx.
func (s *session) lock(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *session) unlock() { <-s.sem }

// drop removes an ended or closed session from memory and closes its
// environment.
func (m *Manager) drop(s *session) {
	m.mu.Lock()
	if s.resident && m.sessions[s.rec.ID] == s {
		delete(m.sessions, s.rec.ID)
	}
	s.resident = false
	m.mu.Unlock()
	s.mu.Lock()
	env := s.env
	s.env = nil
	s.mu.Unlock()
	if env != nil {
		if err := env.Close(); err != nil {
			m.log.Warn("close environment", "session", s.rec.ID, "err", err)
		}
	}
}

// Evict forgets a session held in memory, closing its environment, and
// leaves the store as it is; the next request for id loads it from the
// store. A cluster node calls it when it takes a session over, since
// another node may have written turns its copy lacks. Whether any was
// held is reported.
func (m *Manager) Evict(id string) bool {
	m.mu.Lock()
	s := m.sessions[id]
	m.mu.Unlock()
	if s == nil {
		return false
	}
	m.drop(s)
	return true
}

// Step runs one action in a session.
//
// Step, step and observe are on the stack under every model call, which
// is the deep part of a step; the connection goroutine's stack, shrunk by
// the GC, grows back on each step by as much as they hold. So they keep
// small frames: errors and rare branches are made in separate functions
// (kept out of line), values are passed by pointer, and what follows the
// observation happens in record, whose frame is not under the model call.
func (m *Manager) Step(ctx context.Context, id string, req StepRequest) (*StepResult, error) {
	res, _, err := m.step1(ctx, id, &req, false)
	return res, err
}

// StepJSON is Step that also returns the result as [EncodeResult] encodes
// it, made once for the reply and the store; nil when the step was not
// computed now (a retried turn's stored result), for the caller to encode.
func (m *Manager) StepJSON(ctx context.Context, id string, req StepRequest) (*StepResult, []byte, error) {
	return m.step1(ctx, id, &req, true)
}

func (m *Manager) step1(ctx context.Context, id string, req *StepRequest, wantJSON bool) (*StepResult, []byte, error) {
	if err := m.checkStep(req); err != nil {
		return nil, nil, err
	}
	s, err := m.acquire(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	defer m.release(s)
	act, err := conversation.ParseAction(s.spec.Domain, req.Action)
	if err != nil {
		return nil, nil, BadAction(err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, nil, err
	}
	defer s.unlock()

	s.mu.Lock()
	n := len(s.hist)
	if req.Turn > 0 && req.Turn <= n || req.Turn > 0 && req.Turn != n+1 || s.rec.Status != StatusActive {
		res, err := s.notNextLocked(id, req, &act, n)
		s.mu.Unlock()
		return res, nil, err
	}
	info := s.infoLocked()
	env := s.env
	s.mu.Unlock()

	start := m.opts.Now()
	res, enc, err := m.step(ctx, s, env, &info, &act, req, n+1, wantJSON)
	if m.opts.Observer != nil {
		m.observeStep(s, id, start, res, err)
	}
	return res, enc, err
}

// checkStep checks what a step request says before its session is looked
// up.
//
//go:noinline
func (m *Manager) checkStep(req *StepRequest) error {
	if len(req.Action) > m.opts.MaxActionBytes {
		return fielderr.New(ErrTooLarge, "action", "%d bytes exceeds the limit of %d", len(req.Action), m.opts.MaxActionBytes)
	}
	if req.Turn < 0 {
		return badField("turn", "negative")
	}
	return nil
}

// notNextLocked answers a step that is not the session's next one: a
// turn already recorded (its stored result, when the action is the
// same), a turn out of order, or a session no longer active. s.mu is
// held.
//
//go:noinline
func (s *session) notNextLocked(id string, req *StepRequest, act *conversation.Action, n int) (*StepResult, error) {
	if req.Turn > 0 && req.Turn <= n {
		if s.hist[req.Turn-1].Action != act.Text {
			return nil, fielderr.New(ErrTurnConflict, "turn", "turn %d was recorded with a different action", req.Turn)
		}
		r := *s.result(req.Turn - 1)
		return &r, nil
	}
	if req.Turn > 0 && req.Turn != n+1 {
		return nil, fielderr.New(ErrTurnConflict, "turn", "turn %d is out of order: the next turn is %d", req.Turn, n+1)
	}
	switch status := s.rec.Status; status {
	case StatusTerminated, StatusTruncated:
		return nil, fmt.Errorf("%w: session %s is %s after %d turns", ErrEpisodeOver, id, status, n)
	default:
		return nil, fmt.Errorf("%w: session %s is %s", ErrSessionClosed, id, status)
	}
}

// observeStep tells the Observer about a step.
//
//go:noinline
func (m *Manager) observeStep(s *session, id string, start time.Time, res *StepResult, err error) {
	m.opts.Observer.ObserveStep(StepEvent{Session: id, Domain: string(s.spec.Domain), Backend: s.rec.Backend, Duration: time.Since(start), Result: res, Err: err})
}

// stepFrame is what a step fills in on its way: the input the hooks and
// the environment see, the observation and the result. They outlive the
// calls they are made in (hooks and environments get pointers, the
// caller the result), so they are on the heap; together they are one
// allocation, not three.
type stepFrame struct {
	in  StepInput
	obs Observation
	res StepResult
}

func (m *Manager) step(ctx context.Context, s *session, env Environment, info *SessionInfo, act *conversation.Action, req *StepRequest, turn int, wantJSON bool) (*StepResult, []byte, error) {
	if p := s.takePending(req, turn, m.opts.Now()); p != nil {
		return m.commit(ctx, s, info, p, wantJSON)
	}
	f := &stepFrame{in: StepInput{Turn: turn, Action: *act, History: info.History, Control: req.Control, WorldState: req.WorldState}}
	if len(req.Labels) > 0 {
		f.in.Labels = maps.Clone(req.Labels)
	}
	if err := m.observe(ctx, s, env, info, &f.in, turn, &f.obs); err != nil {
		return nil, nil, err
	}
	return m.record(ctx, s, info, act, req, f, turn, wantJSON)
}

// observe fills obs with the step's observation: the end of the episode
// the action asked for, a hook's answer, or the environment's.
func (m *Manager) observe(ctx context.Context, s *session, env Environment, info *SessionInfo, in *StepInput, turn int, obs *Observation) error {
	if in.Action.End {
		m.endEpisode(ctx, env, &in.Action, obs)
		return nil
	}
	if len(m.opts.Hooks) > 0 {
		if answered, err := m.beforeStep(ctx, info, in, turn, obs); answered || err != nil {
			return err
		}
	}
	if env == nil { // resumed from the store, or forked
		var err error
		if env, err = m.resume(ctx, s, info); err != nil {
			return err
		}
	}
	o, err := env.Step(ctx, *in)
	if err != nil {
		return stepFailed(info.ID, turn, err)
	}
	*obs = o
	return nil
}

// endEpisode is the observation of an action that ends the episode.
//
//go:noinline
func (m *Manager) endEpisode(ctx context.Context, env Environment, act *conversation.Action, obs *Observation) {
	*obs = Observation{Terminated: true, Info: StepInfo{Backend: "rule", EndReason: act.EndReason}}
	if e, ok := env.(EpisodeEnder); ok {
		if err := e.EndEpisode(ctx, obs); err != nil {
			obs.Info.Error = err.Error()
		}
	}
}

// beforeStep runs the hooks' BeforeStep in order until one answers the
// step (answered, with obs filled) or fails.
//
//go:noinline
func (m *Manager) beforeStep(ctx context.Context, info *SessionInfo, in *StepInput, turn int, obs *Observation) (answered bool, err error) {
	for _, h := range m.opts.Hooks {
		o, err := h.BeforeStep(ctx, *info, in)
		if err != nil {
			return false, stepFailed(info.ID, turn, err)
		}
		if o != nil {
			*obs = *o
			if obs.Info.Backend == "" {
				obs.Info.Backend = "hook"
			}
			return true, nil
		}
	}
	return false, nil
}

// stepFailed says which session and turn err stopped.
//
//go:noinline
func stepFailed(id string, turn int, err error) error {
	return fmt.Errorf("session %s turn %d: %w", id, turn, err)
}

// resume makes the environment of a session that has none held: one
// resumed from the store, or forked. A backend that cannot resume it
// marks the session broken.
//
//go:noinline
func (m *Manager) resume(ctx context.Context, s *session, info *SessionInfo) (Environment, error) {
	f, err := m.backend(info.Backend)
	if err != nil {
		return nil, err
	}
	ri := *info
	s.mu.Lock()
	ri.Replica = s.lastReplicaLocked()
	s.mu.Unlock()
	env, err := f(ctx, ri)
	if err != nil {
		if errors.Is(err, ErrNotResumable) {
			_ = m.store.SetStatus(context.WithoutCancel(ctx), info.ID, StatusBroken)
			s.mu.Lock()
			s.rec.Status = StatusBroken
			s.mu.Unlock()
			m.drop(s)
		}
		return nil, fmt.Errorf("resume %s environment of session %s: %w", info.Backend, info.ID, err)
	}
	s.mu.Lock()
	s.env = env
	s.mu.Unlock()
	return env, nil
}

// record makes the step's result from its observation, records the turn
// and runs the hooks' AfterStep. act is the action as parsed, which the
// hooks' changes to in do not touch. The result is encoded once, when the
// caller wants it (wantJSON) or the store takes it (a ResultAppender).
//
//go:noinline
func (m *Manager) record(ctx context.Context, s *session, info *SessionInfo, act *conversation.Action, req *StepRequest, f *stepFrame, turn int, wantJSON bool) (*StepResult, []byte, error) {
	in, obs, res := &f.in, &f.obs, &f.res
	if obs.Message == "" {
		obs.Message = conversation.UserMessage(turn, act.Text, in.WorldState, in.Control)
	}
	m.applyWorldReward(ctx, *info, *act, obs)
	*res = StepResult{Observation: obs.Text, Reward: obs.Reward, Terminated: obs.Terminated, Info: obs.Info}
	res.Info.Turn = turn
	if len(in.Labels) > 0 || len(obs.Info.Labels) > 0 {
		l := maps.Clone(in.Labels)
		if l == nil {
			l = map[string]string{}
		}
		maps.Copy(l, obs.Info.Labels)
		res.Info.Labels = l
	}
	status := StatusActive
	limit := m.opts.MaxTurns
	if info.Spec.MaxTurns > 0 {
		limit = info.Spec.MaxTurns
	}
	switch {
	case obs.Broken:
		res.Terminated = true
		status = StatusBroken
		if res.Info.EndReason == "" {
			res.Info.EndReason = "the environment broke"
		}
	case res.Terminated:
		status = StatusTerminated
		if res.Info.EndReason == "" {
			res.Info.EndReason = "the environment ended the episode"
		}
	case limit > 0 && turn >= limit:
		res.Truncated = true
		status = StatusTruncated
		res.Info.EndReason = fmt.Sprintf("turn limit %d reached", limit)
	}
	ht := HistoryTurn{Action: act.Text, Observation: obs.Text, Message: obs.Message, Assistant: conversation.ObservationResponse(obs.Text)}
	if lim := m.opts.MaxSessionBytes; lim > 0 && status == StatusActive {
		s.mu.Lock()
		size := s.sizeLocked() + turnBytes(ht)
		s.mu.Unlock()
		if size >= lim {
			res.Truncated = true
			status = StatusTruncated
			res.Info.EndReason = fmt.Sprintf("session size limit of %d bytes reached", lim)
		}
	}
	return m.commit(ctx, s, info, &pendingTurn{turn: turn, req: *req, f: f, ht: ht, status: status}, wantJSON)
}

// commit records p, a computed turn, and runs the hooks' AfterStep. A
// turn the store did not take for want of an answer is kept for the
// client's retry (pending.go).
func (m *Manager) commit(ctx context.Context, s *session, info *SessionInfo, p *pendingTurn, wantJSON bool) (*StepResult, []byte, error) {
	res := &p.f.res
	rec := TurnRecord{Turn: p.turn, HistoryTurn: p.ht, Result: *res} // for the store
	ra, _ := m.store.(ResultAppender)
	if p.enc == nil && (wantJSON || ra != nil) {
		var err error
		if p.enc, err = EncodeResult(res); err != nil {
			return nil, nil, fmt.Errorf("record session %s turn %d: %w", info.ID, p.turn, err)
		}
	}
	// A computed step is recorded even if the client went away meanwhile.
	var err error
	if ra != nil {
		err = ra.AppendTurnResult(context.WithoutCancel(ctx), info.ID, rec, p.enc, p.status)
	} else {
		err = m.store.AppendTurn(context.WithoutCancel(ctx), info.ID, rec, p.status)
	}
	if err != nil {
		switch {
		case errors.Is(err, ErrMoved):
			m.drop(s) // its turns are stale; the next request loads them
		case errors.Is(err, ErrStoreUnavailable):
			// kept as a copy: a step that is recorded (nearly all) keeps
			// its pendingTurn off the heap
			kept := *p
			kept.until = m.opts.Now().Add(pendingTTL)
			s.mu.Lock()
			s.pending = &kept
			s.mu.Unlock()
		}
		return nil, nil, fmt.Errorf("record session %s turn %d: %w", info.ID, p.turn, err)
	}
	s.mu.Lock()
	s.appendTurnLocked(p.ht, res)
	s.rec.Status = p.status
	s.rec.UpdatedAt = m.opts.Now().UTC()
	s.mu.Unlock()
	if p.status != StatusActive {
		m.drop(s)
	}
	for _, h := range m.opts.Hooks {
		h.AfterStep(ctx, *info, p.f.in, *res)
	}
	return res, p.enc, nil
}

// reap expires sessions idle longer than IdleTTL.
func (m *Manager) reap(every time.Duration) {
	defer close(m.reaperDone)
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	// Close ends a pass under way too (m.reaping): an expiry waiting on a
	// store that does not answer (a cluster that lost its quorum) must not
	// hold up the shutdown. Expiring is the server's own housekeeping, no
	// client was told of it: a session the store still has active is one
	// more that Close leaves active, to resume on the next start.
	for {
		select {
		case <-m.reaping.Done():
			return
		case <-t.C:
			m.reapIdle(m.reaping)
		}
	}
}

// ReapIdle expires every held session idle longer than IdleTTL now and
// returns how many it expired. The reaper calls it periodically.
func (m *Manager) ReapIdle() int { return m.reapIdle(context.Background()) }

// reapIdle is ReapIdle until ctx ends.
func (m *Manager) reapIdle(ctx context.Context) int {
	if m.opts.IdleTTL <= 0 {
		return 0
	}
	cutoff := m.opts.Now().Add(-m.opts.IdleTTL)
	var idle []*session
	m.mu.Lock()
	for _, s := range m.sessions {
		s.mu.Lock()
		if s.users == 0 && s.lastUsed.Before(cutoff) {
			idle = append(idle, s)
		}
		s.mu.Unlock()
	}
	m.mu.Unlock()
	n := 0
	for _, s := range idle {
		if ctx.Err() != nil {
			break
		}
		select {
		case s.sem <- struct{}{}:
		default:
			continue // a step is running
		}
		s.mu.Lock()
		stillIdle := s.users == 0 && s.lastUsed.Before(cutoff) && s.rec.Status == StatusActive
		if stillIdle {
			s.rec.Status = StatusExpired
		}
		s.mu.Unlock()
		if stillIdle {
			if err := m.store.SetStatus(ctx, s.rec.ID, StatusExpired); err != nil {
				m.log.Warn("expire session", "session", s.rec.ID, "err", err)
			}
			m.drop(s)
			m.log.Info("session expired", "session", s.rec.ID)
			n++
		}
		<-s.sem
	}
	return n
}

// Close stops accepting calls, waits for in-flight ones (until ctx ends),
// closes every environment and the store. Sessions stay active in the
// store and resume on the next start.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return nil
	}
	m.closing = true
	m.mu.Unlock()
	if m.stopReaper != nil {
		m.stopReaper()
		<-m.reaperDone
	}
	done := make(chan struct{})
	go func() { m.inflight.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("drain sessions: %w", ctx.Err())
	}
	m.mu.Lock()
	held := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		held = append(held, s)
	}
	m.mu.Unlock()
	for _, s := range held {
		s.mu.Lock()
		env := s.env
		s.env = nil
		s.mu.Unlock()
		if env != nil {
			_ = env.Close()
		}
	}
	if err == nil {
		err = m.store.Close()
	}
	return err
}
