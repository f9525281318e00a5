package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/sim"
)

// session is what both backends know of their session: where it is and
// the running chain key of its history.
type session struct {
	s     sim.SessionInfo
	chain *Chain
}

func newSession(s sim.SessionInfo) session {
	return session{s: s, chain: NewChain(string(s.Spec.Domain), s.History)}
}

// at is the At of a step after hist; only the turns added since the
// previous step are hashed.
func (ss session) at(hist []sim.HistoryTurn) At {
	a := At{Domain: string(ss.s.Spec.Domain), World: ss.s.Spec.Name, History: ss.chain.At(hist)}
	if len(hist) > 0 {
		a.Prev = hist[len(hist)-1].Observation
	}
	return a
}

// Backend returns the replay BackendFactory over l.
func Backend(l *Library) sim.BackendFactory {
	return func(ctx context.Context, s sim.SessionInfo) (sim.Environment, error) {
		return &replayEnv{lib: l, session: newSession(s)}, nil
	}
}

type replayEnv struct {
	lib *Library
	session
}

func (e *replayEnv) Reset(context.Context) (sim.Observation, error) {
	return sim.Observation{Text: e.s.Spec.InitialState, Info: sim.StepInfo{Backend: "spec"}}, nil
}

func (e *replayEnv) Close() error { return nil }

func (e *replayEnv) Step(ctx context.Context, in sim.StepInput) (sim.Observation, error) {
	start := time.Now()
	m, ok := e.lib.Lookup(e.at(in.History), in.Action.Text)
	info := sim.StepInfo{Backend: BackendReplay, Approximate: m.Approximate}
	if !ok {
		info.Error = fmt.Sprintf("no recorded %s transitions to replay; configure a world model or add recordings", e.s.Spec.Domain)
		return sim.Observation{Text: "[replay: no recording for this domain]", Info: info}, nil
	}
	if m.Approximate {
		if e.lib.strict {
			nearest := m.Action
			if m.Unrecorded && len(m.Nearest) > 0 {
				nearest = m.Nearest[0].Action
			}
			return sim.Observation{}, fielderr.New(sim.ErrBadRequest, "action",
				"no recorded transition answers this action after this history (strict replay); the nearest recorded action is %.200q", nearest)
		}
		if m.Unrecorded {
			return e.unrecorded(m, start)
		}
		// The answer is about another action: say which, so nobody reads
		// it as the answer to the action sent.
		b, err := json.Marshal(Nearest{Action: m.Action, World: m.World, Similarity: m.Score, ActionSimilarity: m.ActionSimilarity})
		if err != nil {
			return sim.Observation{}, err
		}
		info.Extra = map[string]json.RawMessage{ExtraNearest: b}
	}
	info.LatencyMS = time.Since(start).Milliseconds()
	return sim.Observation{Text: m.Observation, Info: info}, nil
}

// unrecorded answers an action no recording is close enough to: an
// observation saying so and naming the nearest recorded actions (also in
// info.extra, ExtraUnrecorded), with info.error set, so nobody takes it
// for the environment's answer.
func (e *replayEnv) unrecorded(m Match, start time.Time) (sim.Observation, error) {
	b, err := json.Marshal(m.Nearest)
	if err != nil {
		return sim.Observation{}, err
	}
	info := sim.StepInfo{Backend: BackendReplay, Approximate: true, Extra: map[string]json.RawMessage{ExtraUnrecorded: b},
		Error: fmt.Sprintf("unrecorded action: no recorded %s action within similarity %.2f of it", e.s.Spec.Domain, e.lib.minSim)}
	info.LatencyMS = time.Since(start).Milliseconds()
	return sim.Observation{Text: UnrecordedText(m.Nearest), Info: info}, nil
}

// UnrecordedText is the observation of an action no recording answers:
// what happened, the nearest recorded actions, and the ways on.
func UnrecordedText(near []Nearest) string {
	var b strings.Builder
	b.WriteString("[replay: unrecorded action] No recording answers this action, and none is close enough to answer for it.")
	if len(near) > 0 {
		b.WriteString(" The nearest recorded actions:")
		for i, n := range near {
			fmt.Fprintf(&b, "\n  %d. %.200s", i+1, n.Action)
			if n.World != "" {
				fmt.Fprintf(&b, "  (world %s, %.0f%% of the words in common)", n.World, 100*n.ActionSimilarity)
			}
		}
	}
	b.WriteString("\nSend one of them (recordings: examples/recordings), or serve a world model (--model URL) to simulate any action.")
	return b.String()
}

// ExtraNearest is the info.extra key of an approximate answer's Nearest.
const ExtraNearest = "replay_nearest"

// ExtraUnrecorded is the info.extra key of an unrecorded action's answer:
// the nearest recorded actions, a list of Nearest.
const ExtraUnrecorded = "replay_unrecorded"

// Nearest says which recorded transition an approximate replay answer
// comes from.
type Nearest struct {
	// Action is the recorded action the observation answered (not the
	// action of the step).
	Action string `json:"recorded_action"`
	// World is the world it was recorded in ("" for recordings of none).
	World string `json:"recorded_world,omitempty"`
	// Similarity is the match score: 0.7 × word overlap of the actions +
	// 0.3 × word overlap of the previous observations (+0.1 same world).
	Similarity float64 `json:"similarity"`
	// ActionSimilarity is the word overlap of the actions alone, which an
	// approximate answer needs at least Options.MinSimilarity of.
	ActionSimilarity float64 `json:"action_similarity"`
}

// Cache returns a BackendFactory that answers exact hits recorded for the
// session's world and model from l and sends misses to next, recording
// next's answers into l (and its file, if RecordTo was called). model is
// the model next serves when a session names none. Approximate matches are
// never used as cache hits. Steps carrying control or world-state text
// bypass the cache: their answer depends on more than the history and
// action.
func Cache(l *Library, model string, next sim.BackendFactory) sim.BackendFactory {
	return func(ctx context.Context, s sim.SessionInfo) (sim.Environment, error) {
		inner, err := next(ctx, s)
		if err != nil {
			return nil, err
		}
		m := s.Model
		if m == "" {
			m = model
		}
		return &cacheEnv{lib: l, session: newSession(s), model: m, next: inner}, nil
	}
}

type cacheEnv struct {
	lib *Library
	session
	model string
	next  sim.Environment
}

func (e *cacheEnv) Reset(ctx context.Context) (sim.Observation, error) { return e.next.Reset(ctx) }
func (e *cacheEnv) Close() error                                       { return e.next.Close() }

func (e *cacheEnv) Step(ctx context.Context, in sim.StepInput) (sim.Observation, error) {
	if in.Control != "" || in.WorldState != "" {
		return e.next.Step(ctx, in)
	}
	a := e.at(in.History)
	a.Model = e.model
	if obs, ok := e.lib.cached(a, in.Action.Text); ok {
		return sim.Observation{Text: obs, Info: sim.StepInfo{Backend: BackendCache}}, nil
	}
	obs, err := e.next.Step(ctx, in)
	if err != nil {
		return obs, err
	}
	if obs.Info.Error == "" {
		if err := e.lib.Record(a, in.Action.Text, obs.Text); err != nil {
			return obs, fmt.Errorf("record transition: %w", err)
		}
	}
	return obs, nil
}
