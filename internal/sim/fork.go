package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
)

// ForkRequest branches a session.
type ForkRequest struct {
	// AtTurn forks from the state after that many turns; 0 means all.
	AtTurn int
	// Seed replaces the parent's seed (branches of a GRPO group usually
	// want different seeds).
	Seed   *int64
	Labels map[string]string
}

// Fork starts a new session with the same world and history as id.
func (m *Manager) Fork(ctx context.Context, id string, req ForkRequest) (*Reply, error) {
	return m.fork(ctx, id, req, false)
}

// ForkPrivate forks the private session id (see CreateRequest.Private),
// which Fork does not know. The fork is an ordinary session its client
// may step; its Parent and Root are not id but [PrivateRootName] of it,
// the same for every fork of id, so forks of one private root still share
// their perturbation draws and model affinity, and no reply, state or
// trajectory names the private session.
func (m *Manager) ForkPrivate(ctx context.Context, id string, req ForkRequest) (*Reply, error) {
	return m.fork(ctx, id, req, true)
}

// PrivateRootName is what the forks of the private session id name as
// their parent and root: a digest that no session id can equal (it holds
// a ':', which ids never do) and from which id cannot be recovered.
func PrivateRootName(id string) string {
	sum := sha256.Sum256([]byte("agentworld private root\x00" + id))
	return "private:" + hex.EncodeToString(sum[:16])
}

func (m *Manager) fork(ctx context.Context, id string, req ForkRequest, private bool) (*Reply, error) {
	s, err := m.acquireAs(ctx, id, private)
	if err != nil {
		return nil, err
	}
	defer m.release(s)
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	parent := s.rec
	spec := s.spec
	compiled := s.compiled
	turns := s.turnsLocked()
	s.mu.Unlock()
	s.unlock()
	if req.AtTurn < 0 || req.AtTurn > len(turns) {
		return nil, badField("at_turn", "must be between 0 and %d", len(turns))
	}
	status := parent.Status
	if req.AtTurn > 0 && req.AtTurn < len(turns) {
		turns = turns[:req.AtTurn]
		status = StatusActive
	}
	switch status {
	case StatusClosed, StatusExpired, StatusBroken:
		status = StatusActive // a branch of a closed session is a new, live one
	}
	if err := m.reserve(); err != nil {
		return nil, err
	}
	now := m.opts.Now().UTC()
	child := parent
	child.ID = newID()
	child.Parent = parent.ID
	if parent.Private {
		child.Private = false
		child.Parent = PrivateRootName(parent.ID)
		child.Root = child.Parent
	}
	child.Status = status
	child.CreatedAt, child.UpdatedAt = now, now
	if req.Seed != nil {
		child.Seed = req.Seed
	}
	if len(req.Labels) > 0 {
		child.Labels = maps.Clone(parent.Labels)
		if child.Labels == nil {
			child.Labels = map[string]string{}
		}
		maps.Copy(child.Labels, req.Labels)
	}
	ns := newSession(child, spec, turns, m.opts.Now())
	ns.compiled = compiled
	// A backend that cannot rebuild its state from the history (a real
	// sandbox, the real side of a shadow session) refuses now, before a
	// child exists, not on the child's first step. The environment made to
	// ask is the child's; an ended child (a fork of an ended episode at its
	// end) takes no step, so its environment is closed again, but a real
	// session's fork is refused whether or not its episode ended.
	if len(turns) > 0 {
		f, err := m.backend(child.Backend)
		if err == nil {
			ns.env, err = f(ctx, ns.envInfoLocked())
		}
		if err != nil {
			m.unreserve()
			return nil, fmt.Errorf("fork of %s: %w", id, err)
		}
		if status != StatusActive {
			_ = ns.env.Close()
			ns.env = nil
		}
	}
	if err := m.store.CreateSession(context.WithoutCancel(ctx), child, turns); err != nil {
		m.unreserve()
		if ns.env != nil {
			_ = ns.env.Close()
		}
		return nil, fmt.Errorf("store fork of %s: %w", id, err)
	}
	if status == StatusActive {
		m.adopt(ns)
	} else {
		m.unreserve()
	}
	obs := child.InitialObservation
	if len(turns) > 0 {
		obs = turns[len(turns)-1].Observation
	}
	m.log.Info("session forked", "session", child.ID, "parent", id, "turns", len(turns))
	return &Reply{SessionID: child.ID, Observation: obs, Info: ReplyInfo{
		Turn: len(turns), World: child.World, Domain: child.Domain, Backend: child.Backend, Source: "fork", Parent: child.Parent,
		Terminated: status == StatusTerminated, Truncated: status == StatusTruncated,
	}}, nil
}

// Delete closes a session: its environment is released and no further
// steps are accepted; its transcript stays readable.
func (m *Manager) Delete(ctx context.Context, id string) error {
	return m.delete(ctx, id, false)
}

// DeletePrivate closes the private session id, which Delete does not know.
func (m *Manager) DeletePrivate(ctx context.Context, id string) error {
	return m.delete(ctx, id, true)
}

func (m *Manager) delete(ctx context.Context, id string, private bool) error {
	s, err := m.acquireAs(ctx, id, private)
	if err != nil {
		return err
	}
	defer m.release(s)
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	s.mu.Lock()
	st := s.rec.Status
	s.mu.Unlock()
	if st == StatusActive {
		if err := m.store.SetStatus(context.WithoutCancel(ctx), id, StatusClosed); err != nil {
			return fmt.Errorf("close session %s: %w", id, err)
		}
		s.mu.Lock()
		s.rec.Status = StatusClosed
		s.mu.Unlock()
	}
	m.drop(s)
	m.log.Info("session closed", "session", id)
	return nil
}
