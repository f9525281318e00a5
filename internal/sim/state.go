package sim

import (
	"context"
	"encoding/json"

	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
)

// Trajectory returns a session's record in the unified trajectory schema:
// components and rendered system prompt, every turn with its step info in
// Meta["info"] and the exact user message in Meta["message"], and session
// facts in the trajectory's Meta.
func (m *Manager) Trajectory(ctx context.Context, id string) (*trajectory.Trajectory, error) {
	s, err := m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	defer m.release(s)
	s.mu.Lock()
	rec, spec := s.rec, s.spec
	turns := s.turnsLocked()
	s.mu.Unlock()
	return SessionTrajectory(rec, spec, turns), nil
}

// SessionTrajectory is a session in the unified trajectory schema: its
// world's components and rendered system prompt, every turn with its step
// info in meta, and the session's facts (world, backend, status, seed,
// labels, return, …) in the trajectory's meta. It is what GET
// /v1/sessions/{id} answers and what `data convert --from sessions`
// exports from a database.
func SessionTrajectory(rec SessionRecord, spec *world.Spec, turns []TurnRecord) *trajectory.Trajectory {
	comp := Components(spec)
	t := &trajectory.Trajectory{
		ID: rec.ID, Domain: rec.Domain, Source: "session", Components: &comp, SystemPrompt: rec.SystemPrompt,
		Turns: make([]trajectory.Turn, len(turns)),
		Meta:  map[string]json.RawMessage{},
	}
	// Turns something scored carry meta.reward; the episode return (their
	// sum) is in the trajectory's meta when any turn was scored.
	scored, ret := false, 0.0
	for i, tr := range turns {
		t.Turns[i] = trajectory.Turn{Action: tr.Action, Observation: tr.Observation, Meta: map[string]json.RawMessage{
			"info":    mustJSON(tr.Result.Info),
			"message": mustJSON(tr.Message),
		}}
		if tr.Result.Terminated || tr.Result.Truncated {
			t.Turns[i].Meta["terminated"] = mustJSON(tr.Result.Terminated)
			t.Turns[i].Meta["truncated"] = mustJSON(tr.Result.Truncated)
		}
		if tr.Result.Reward != 0 || tr.Result.Info.RewardComponents != nil {
			t.Turns[i].Meta["reward"] = mustJSON(tr.Result.Reward)
			scored = true
		}
		ret += tr.Result.Reward
	}
	meta := map[string]any{
		"world": rec.World, "backend": rec.Backend, "status": rec.Status, "root": rec.Root,
		"initial_observation": rec.InitialObservation, "created_at": rec.CreatedAt, "updated_at": rec.UpdatedAt,
	}
	if scored {
		meta["return"] = ret
	}
	if rec.Parent != "" {
		meta["parent"] = rec.Parent
	}
	if rec.Model != "" {
		meta["model"] = rec.Model
	}
	if rec.Seed != nil {
		meta["seed"] = *rec.Seed
	}
	if len(rec.Labels) > 0 {
		meta["labels"] = rec.Labels
	}
	if len(rec.Params) > 0 {
		meta["params"] = rec.Params
	}
	for k, v := range meta {
		t.Meta[k] = mustJSON(v)
	}
	return t
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}

// State summarizes a session (OpenEnv's /state).
type State struct {
	EpisodeID string `json:"episode_id"`
	StepCount int    `json:"step_count"`
	World     string `json:"world"`
	Domain    string `json:"domain"`
	Backend   string `json:"backend"`
	Status    string `json:"status"`
	Parent    string `json:"parent,omitempty"`
	// LastObservation is the newest observation (the initial one before
	// any step).
	LastObservation string `json:"last_observation"`
}

// State returns a session's summary.
func (m *Manager) State(ctx context.Context, id string) (*State, error) {
	s, err := m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	defer m.release(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.rec.InitialObservation
	if n := len(s.hist); n > 0 {
		last = s.hist[n-1].Observation
	}
	return &State{EpisodeID: s.rec.ID, StepCount: len(s.hist), World: s.rec.World, Domain: s.rec.Domain,
		Backend: s.rec.Backend, Status: s.rec.Status, Parent: s.rec.Parent, LastObservation: last}, nil
}
