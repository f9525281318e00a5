// Package verify measures a world model against real environments:
// teacher-forced, each recorded turn of a real trajectory is predicted
// from the real history and compared with the real observation; closed
// loop, the actions of a simulated episode are replayed in the real
// environment and the task's check says whether the simulated success
// was real (`agentworld verify`).
package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/realenv"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Predictor is a simulator seen from verification: it predicts the
// observation of turn (1-based) given the earlier turns exactly as they
// happened. Implementations must be safe for concurrent use.
type Predictor interface {
	Predict(ctx context.Context, turn int, action string, history []trajectory.Turn) (string, error)
}

// TurnReport is one turn of a verification: the action, both observations
// and their divergence.
type TurnReport struct {
	realenv.Divergence
	// Skipped marks a turn the simulator was not asked (an action that
	// ends the episode by the domain's rule); it is left out of the summary.
	Skipped bool   `json:"skipped,omitempty"`
	Action  string `json:"action"`
	Real    string `json:"real"`
	Sim     string `json:"sim"`
}

// Summary aggregates a verification's turns.
type Summary struct {
	Turns int `json:"turns"`
	// Exact counts turns whose deterministic content matched; ExactRate is
	// Exact / Turns.
	Exact     int     `json:"exact"`
	ExactRate float64 `json:"exact_rate"`
	// MeanSimilarity is the mean of the turns' similarities.
	MeanSimilarity float64 `json:"mean_similarity"`
	// MeanRuleTotal is the mean of the turns' rules-judge totals (1..5).
	MeanRuleTotal float64 `json:"mean_rule_total"`
	// RulesPassRate is the share of turns whose rule checks all passed.
	RulesPassRate float64 `json:"rules_pass_rate"`
	// Errors counts turns the simulator did not answer.
	Errors int `json:"errors"`
	// FirstDivergence is the first turn that is not an exact match, 0 if
	// none.
	FirstDivergence int `json:"first_divergence"`
}

// VerifyReport is the outcome of replaying a trajectory through a
// simulator (teacher forcing) or a simulated episode through the real
// environment (closed loop).
type VerifyReport struct {
	Mode       string       `json:"mode"`
	Trajectory string       `json:"trajectory"`
	Domain     string       `json:"domain"`
	Task       string       `json:"task,omitempty"`
	Summary    Summary      `json:"summary"`
	Turns      []TurnReport `json:"turns"`
	// Check is the task check's result (closed loop only).
	Check *realenv.CheckResult `json:"check,omitempty"`
	// Recording is where the closed-loop real run was recorded, if kept.
	Recording string `json:"recording,omitempty"`
	// SimulatedSteps and RealSteps count the episode's actions and how many
	// of them the real environment took before its episode ended.
	SimulatedSteps int `json:"simulated_steps,omitempty"`
	RealSteps      int `json:"real_steps,omitempty"`
}

// Summarize fills r.Summary from r.Turns.
func (r *VerifyReport) Summarize() {
	s := Summary{}
	passed := 0
	for _, t := range r.Turns {
		if t.Skipped {
			continue
		}
		s.Turns++
		if t.Exact {
			s.Exact++
		} else if s.FirstDivergence == 0 {
			s.FirstDivergence = t.Turn
		}
		if t.RulesPassed {
			passed++
		}
		if t.Error != "" {
			s.Errors++
		}
		s.MeanSimilarity += t.Similarity
		s.MeanRuleTotal += t.RuleTotal
	}
	if s.Turns > 0 {
		n := float64(s.Turns)
		s.ExactRate = float64(s.Exact) / n
		s.MeanSimilarity /= n
		s.MeanRuleTotal /= n
		s.RulesPassRate = float64(passed) / n
	}
	r.Summary = s
}

// VerifyOptions configure TeacherForced. The zero value asks the simulator
// four turns at a time and reports no progress.
type VerifyOptions struct {
	// Concurrency is how many turns are predicted at once; 0 means 4.
	Concurrency int
	// Progress receives one line per finished turn; nil means none.
	Progress io.Writer
}

// TeacherForced replays a recorded trajectory through a simulator: for
// every turn k the simulator sees the real turns 1..k-1 and action k, and
// its prediction is compared with the real observation k. A turn the
// simulator cannot answer is reported with its error, not fatal; a
// cancelled context is.
func TeacherForced(ctx context.Context, t *trajectory.Trajectory, p Predictor, opts *VerifyOptions) (*VerifyReport, error) {
	var o VerifyOptions
	if opts != nil {
		o = *opts
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if len(t.Turns) == 0 {
		return nil, fmt.Errorf("trajectory %s: %w: turns (empty trajectory)", t.ID, trajectory.ErrMissingField)
	}
	d := domain.Domain(t.Domain)
	rep := &VerifyReport{Mode: "teacher-forced", Trajectory: t.ID, Domain: t.Domain, Turns: make([]TurnReport, len(t.Turns))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Concurrency)
	var mu sync.Mutex
	done := 0
	for i := range t.Turns {
		g.Go(func() error {
			turn := t.Turns[i]
			sim, err := p.Predict(gctx, i+1, turn.Action, t.Turns[:i])
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, realenv.ErrEndAction) {
				rep.Turns[i] = TurnReport{Skipped: true, Action: turn.Action, Real: turn.Observation}
				rep.Turns[i].Turn = i + 1
				rep.Turns[i].Error = err.Error()
				return nil
			}
			tr := TurnReport{Divergence: realenv.CompareTurn(d, t.Turns[:i], turn.Action, turn.Observation, sim), Action: turn.Action, Real: turn.Observation, Sim: sim}
			tr.Turn = i + 1
			if err != nil {
				tr.Error = err.Error()
			}
			rep.Turns[i] = tr
			if o.Progress != nil {
				mu.Lock()
				done++
				fmt.Fprintf(o.Progress, "verify %s: turn %d done (%d/%d) exact=%v similarity=%.3f\n", t.ID, i+1, done, len(t.Turns), tr.Exact, tr.Similarity)
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	rep.Summarize()
	return rep, nil
}

// ClosedLoop replays the actions of an episode an agent produced against
// the simulator in the real terminal of task, runs the task's check, and
// compares each simulated observation with the real one.
func ClosedLoop(ctx context.Context, task *realenv.Task, simulated *trajectory.Trajectory, opts *realenv.RunOptions) (*VerifyReport, error) {
	actions := make([]string, len(simulated.Turns))
	for i, tu := range simulated.Turns {
		actions[i] = tu.Action
	}
	run, err := realenv.RunTask(ctx, task, actions, opts)
	if err != nil {
		return nil, err
	}
	real := run.Recording.Trajectory()
	rep := &VerifyReport{Mode: "closed-loop", Trajectory: simulated.ID, Domain: string(domain.Terminal), Task: task.Name, Check: &run.Check, Recording: run.Recording.Path(), SimulatedSteps: len(actions), RealSteps: run.Steps}
	for i, tu := range real.Turns {
		if i >= len(simulated.Turns) {
			break
		}
		tr := TurnReport{Divergence: realenv.CompareTurn(domain.Terminal, real.Turns[:i], tu.Action, tu.Observation, simulated.Turns[i].Observation), Action: tu.Action, Real: tu.Observation, Sim: simulated.Turns[i].Observation}
		tr.Turn = i + 1
		rep.Turns = append(rep.Turns, tr)
	}
	rep.Summarize()
	return rep, nil
}
