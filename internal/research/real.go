package research

import (
	"context"
	"fmt"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/realenv"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/verify"
	"github.com/agentworld/agentworld/internal/world"
)

// RealScore is how far a version's simulator strays from recorded real
// trajectories when replayed teacher-forced (each turn predicted from the
// real turns before it).
type RealScore struct {
	// Divergence is 100 × (1 − the mean turn similarity), averaged over the
	// trajectories: 0 when every prediction matched the real observation.
	// Lower is better.
	Divergence float64 `json:"divergence"`
	// ExactRate is the share of turns whose deterministic content matched.
	ExactRate float64 `json:"exact_rate"`
	Turns     int     `json:"turns"`
	// Errors counts turns the simulator did not answer; they count as
	// fully divergent.
	Errors int `json:"errors,omitempty"`
}

func (r *RealScore) String() string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.Divergence)
}

// RealChecker scores versions on recorded real trajectories ([RealCheck]
// with the verify machinery), so a prompt cannot win by pleasing the
// judge alone.
type RealChecker interface {
	Divergence(ctx context.Context, v *promptlib.Version, d domain.Domain) (*RealScore, error)
	// Calls is the most world-model calls one scoring makes.
	Calls() int
}

// realVerdict says why a candidate with real score c is rejected against
// the seed's s, "" when it is not.
func realVerdict(c, s *RealScore, tol float64) string {
	if c == nil || s == nil || c.Divergence <= s.Divergence+tol {
		return ""
	}
	return fmt.Sprintf("real divergence %.2f exceeds the seed's %.2f by more than %.2f", c.Divergence, s.Divergence, tol)
}

// RealCheckOptions tune a [RealCheck]; nil means the defaults.
type RealCheckOptions struct {
	// Concurrency is how many turns of a trajectory are predicted at once;
	// 0 means the verify machinery's default (4).
	Concurrency int
}

// RealCheck is the [RealChecker] of recorded real trajectories: it scores
// a version by teacher-forced divergence with the verify machinery of
// [realenv], every turn predicted by the world model from the real turns
// before it, under the system prompt the version renders from the
// recording's own components (so the check measures the template, not the
// prompt the recording was made under).
type RealCheck struct {
	trajs []*trajectory.Trajectory
	specs []*world.Spec
	// backend is the world model the predictions come from.
	backend     sim.BackendFactory
	concurrency int
	calls       int
}

// NewRealCheck reads the recordings of dir (realenv recordings, .json or
// .jsonl) and keeps those of domain d with turns. A kept recording without
// components is an error, since no version could render its prompt, and so
// is a dir with none of d.
func NewRealCheck(dir string, d domain.Domain, backend sim.BackendFactory, o *RealCheckOptions) (*RealCheck, error) {
	ts, err := realenv.ReadTrajectories(dir)
	if err != nil {
		return nil, err
	}
	r := &RealCheck{backend: backend}
	if o != nil {
		r.concurrency = o.Concurrency
	}
	for _, t := range ts {
		if t.Domain != string(d) || len(t.Turns) == 0 {
			continue
		}
		if t.Components == nil {
			return nil, fmt.Errorf("%s: trajectory %s has no components, so no template version can render its prompt", dir, t.ID)
		}
		c := t.Components
		spec := &world.Spec{Name: t.ID, Domain: d, TaskDescription: c.TaskDescription, ActionSpace: world.ActionSpace{Description: c.ActionSpace},
			InitialState: c.InitialState, SimulationInstruction: c.SimulationInstruction}
		if err := spec.Validate(); err != nil {
			return nil, fmt.Errorf("%s: trajectory %s: components: %w", dir, t.ID, err)
		}
		r.trajs, r.specs = append(r.trajs, t), append(r.specs, spec)
		r.calls += len(t.Turns)
	}
	if len(r.trajs) == 0 {
		return nil, fmt.Errorf("%s: no recorded %s trajectory with turns", dir, d)
	}
	return r, nil
}

// Calls is one world-model call per recorded turn.
func (r *RealCheck) Calls() int { return r.calls }

// Divergence replays every recording teacher-forced under v's rendering of
// its components for domain d.
func (r *RealCheck) Divergence(ctx context.Context, v *promptlib.Version, d domain.Domain) (*RealScore, error) {
	s := &RealScore{}
	exact := 0
	for i, t := range r.trajs {
		sys, err := v.Render(d, *t.Components)
		if err != nil {
			return nil, err
		}
		p, err := realenv.NewSimPredictorPrompt(r.backend, r.specs[i], sys)
		if err != nil {
			return nil, err
		}
		rep, err := verify.TeacherForced(ctx, t, p, &verify.VerifyOptions{Concurrency: r.concurrency})
		if err != nil {
			return nil, fmt.Errorf("trajectory %s: %w", t.ID, err)
		}
		s.Divergence += 100 * (1 - rep.Summary.MeanSimilarity)
		s.Turns += rep.Summary.Turns
		s.Errors += rep.Summary.Errors
		exact += rep.Summary.Exact
	}
	s.Divergence /= float64(len(r.trajs))
	if s.Turns > 0 {
		s.ExactRate = float64(exact) / float64(s.Turns)
	}
	return s, nil
}
