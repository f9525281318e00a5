// Package research improves a world-model template version by reflective
// search and says, with statistics, whether it improved: the data is split
// by trajectory into train, validation and test; each iteration scores a
// parent version on a train minibatch, shows an optimizer model the worst
// samples (each with its action, the turns before it, its world's
// components and the judge's weaknesses), and takes back an edited
// template (an answer with none is asked again, then the iteration is
// rejected with the reason; only accepted candidates get a version name);
// an edit that beats its parent on the minibatch is scored on validation
// and joins a per-trajectory Pareto front parents are drawn from. The best
// validation candidate meets the seed on the test split, and "improved" is
// claimed only when a paired bootstrap interval over test trajectories
// excludes zero. Every candidate is a [promptlib.Version]; iterations are
// journaled so a killed run resumes where it stopped.
//
// The package never calls a model itself: an [Evaluator] (the CLI wires the
// bench pipeline) scores versions and an [Optimizer] proposes edits.
package research

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Sample is one scored turn of an evaluation.
type Sample struct {
	Trajectory string   `json:"trajectory"`
	Turn       int      `json:"turn"`
	Score      float64  `json:"score"` // 0..100
	Weaknesses []string `json:"weaknesses,omitempty"`
	Truth      string   `json:"truth,omitempty"`
	Prediction string   `json:"prediction,omitempty"`
	// Action, History and World are filled by [Run] from the trajectory
	// for the samples the optimizer sees (an Evaluator leaves them
	// empty): the turn's action, the turns before it, and the world's
	// components as text, so the optimizer reads each case as the
	// simulator did, not only its outcome.
	Action  string            `json:"action,omitempty"`
	History []trajectory.Turn `json:"history,omitempty"`
	World   *promptlib.Parts  `json:"world,omitempty"`
}

// Evaluation is a version's result on a set of trajectories.
type Evaluation struct {
	// PerTrajectory is the mean score (0..100) of each trajectory's turns.
	PerTrajectory map[string]float64
	Samples       []Sample
}

// Evaluator scores version v on trajs of domain d, rendering each
// trajectory's system prompt from its components with v.
type Evaluator interface {
	Evaluate(ctx context.Context, v *promptlib.Version, d domain.Domain, trajs []*trajectory.Trajectory) (*Evaluation, error)
}

// OptimizeRequest is what the optimizer sees.
type OptimizeRequest struct {
	Domain   domain.Domain
	Template string
	// Score is the parent's mean on the minibatch.
	Score float64
	// Worst are the lowest-scored samples of the minibatch.
	Worst []Sample
}

// Proposal is an edited template and why.
type Proposal struct {
	Template  string
	Rationale string
}

// Optimizer proposes an edited template.
type Optimizer interface {
	Propose(ctx context.Context, req OptimizeRequest) (*Proposal, error)
}

// Options configure [Run].
type Options struct {
	// Library receives every candidate version. Required.
	Library *promptlib.Library
	// Seed names the starting version; "" means the library's promoted
	// version (v0 when none).
	Seed string
	// Domain is the domain whose template is edited. Required.
	Domain domain.Domain
	// Trajectories are the data; those of Domain are used when a version
	// can render their system prompt: from their components, or, without
	// components, from the components recovered from their system prompt
	// (Library.Decompose, as bench --template does), so converted
	// benchmark data works.
	Trajectories []*trajectory.Trajectory
	Evaluator    Evaluator
	Optimizer    Optimizer
	// Iterations is the number of optimizer proposals; 0 means 10.
	Iterations int
	// Minibatch is the train trajectories per iteration; 0 means 4.
	Minibatch int
	// Worst is how many low samples the optimizer sees; 0 means 6.
	Worst int
	// ValFraction and TestFraction of the trajectories; 0 means 0.25 each.
	ValFraction, TestFraction float64
	// Resamples of the bootstrap; 0 means 2000.
	Resamples int
	// RandSeed makes the split, minibatches and parent draws repeatable.
	RandSeed uint64
	// Journal receives the run's lines: a header, each call's cost, each
	// finished iteration, a budget stop. Nil means none.
	Journal io.Writer
	// Resume is what an earlier run journaled (see [ReadJournal]): its
	// iterations are not done again and its spend counts against Budget.
	// Nil starts afresh.
	Resume *Journal
	// Budget caps the calls and tokens of the clients it meters (the
	// caller wraps them with [Budget.Meter]); nil means no cap.
	Budget *Budget
	// SampleCalls is the calls one evaluated sample costs (world model and
	// judge), used to hold back the test split's share of Budget and for
	// [EstimateCost]; 0 means 2 (an offline judge makes it 1).
	SampleCalls int
	// Real, when set, scores versions by teacher-forced divergence on
	// recorded real trajectories: a candidate more than RealTolerance
	// worse than the seed is rejected whatever the judge said. Nil skips
	// the check.
	Real RealChecker
	// RealTolerance is the divergence points (0..100) a candidate may lose
	// to the seed; 0 means 1, negative means none.
	RealTolerance float64
	// ModelName, JudgeName and OptimizerName name the models, for the
	// journal header and the report; "" when unknown. Offline marks an
	// offline judge whose scores are not comparable with the rubric
	// judge's. RealName names the real trajectories.
	ModelName, JudgeName, OptimizerName, RealName string
	// JudgePrompts says which text the rubric judge was given ("agentworld
	// (not the official text)" or the official text's label); "" with the
	// offline judge. Reports repeat it.
	JudgePrompts string
	Offline      bool
	// Progress receives a line per iteration and every ProgressCalls
	// calls with the spend so far; nil means none.
	Progress io.Writer
	// ProgressCalls is how many calls pass between spend lines; 0 means
	// 100, negative means none between iterations.
	ProgressCalls int
	// Logger reports progress; nil discards it.
	Logger *slog.Logger
}

// ErrNoData means too few usable trajectories for three splits.
var ErrNoData = errors.New("not enough trajectories")

func (o *Options) defaults() {
	if o.Iterations == 0 {
		o.Iterations = 10
	}
	if o.Minibatch == 0 {
		o.Minibatch = 4
	}
	if o.Worst == 0 {
		o.Worst = 6
	}
	if o.ValFraction == 0 {
		o.ValFraction = 0.25
	}
	if o.TestFraction == 0 {
		o.TestFraction = 0.25
	}
	if o.Resamples == 0 {
		o.Resamples = 2000
	}
	if o.SampleCalls == 0 {
		o.SampleCalls = 2
	}
	switch {
	case o.RealTolerance == 0:
		o.RealTolerance = 1
	case o.RealTolerance < 0:
		o.RealTolerance = 0
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.ProgressCalls == 0 {
		o.ProgressCalls = 100
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Splits are trajectories assigned by id, never by turn.
type Splits struct {
	Train, Val, Test []*trajectory.Trajectory
}

// Split assigns each trajectory by a hash of its id and seed, so the
// assignment does not depend on input order, and a trajectory's turns stay
// together.
func Split(trajs []*trajectory.Trajectory, val, test float64, seed uint64) Splits {
	type keyed struct {
		k uint64
		t *trajectory.Trajectory
	}
	ks := make([]keyed, len(trajs))
	for i, t := range trajs {
		h := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s", seed, t.ID))
		ks[i] = keyed{binary.BigEndian.Uint64(h[:8]), t}
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].k < ks[j].k || (ks[i].k == ks[j].k && ks[i].t.ID < ks[j].t.ID) })
	n := len(ks)
	nTest := int(float64(n)*test + 0.5)
	nVal := int(float64(n)*val + 0.5)
	var s Splits
	for i, k := range ks {
		switch {
		case i < nTest:
			s.Test = append(s.Test, k.t)
		case i < nTest+nVal:
			s.Val = append(s.Val, k.t)
		default:
			s.Train = append(s.Train, k.t)
		}
	}
	return s
}

// rng is the generator of one purpose in one iteration, independent of
// everything before it, so a resumed run draws what the first run drew.
func rng(seed uint64, what string, iter int) *rand.Rand {
	h := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s\x00%d", seed, what, iter))
	return rand.New(rand.NewPCG(binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:16])))
}

func mean(m map[string]float64) float64 {
	if len(m) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s / float64(len(m))
}

// Estimate is the most a run can cost: samples (turns) evaluated, each
// SampleCalls calls (world model and judge), optimizer calls and the real
// check's world-model calls. Cached calls (a parent's minibatch scored
// before, a resumed run) cost nothing.
type Estimate struct {
	Trajectories, Train, Val, Test int
	Samples, OptimizerCalls        int
	// RealCalls are the real-environment check's calls: the seed and every
	// candidate that wins its minibatch.
	RealCalls int
	// Calls is all of them together.
	Calls int
	// TestCalls is the final test's share, held back from a call cap so
	// that a run ending on its budget can still compare on the test split.
	TestCalls int
	// Tokens is a rough worst case from text length (four bytes a token).
	Tokens int64
}

// usable are the trajectories of o.Domain a version can render a prompt
// for, each with its world as text: from its components, or recovered from
// its system prompt. skipped counts those of o.Domain that have neither.
func usable(o *Options) (data []*trajectory.Trajectory, worlds map[string]*promptlib.Parts, skipped int) {
	worlds = map[string]*promptlib.Parts{}
	for _, t := range o.Trajectories {
		if t.Domain != string(o.Domain) {
			continue
		}
		if p := worldOf(o.Library, o.Domain, t); p != nil {
			data = append(data, t)
			worlds[t.ID] = p
			continue
		}
		skipped++
	}
	return data, worlds, skipped
}

// worldOf is a trajectory's world as text: its components, or those
// recovered from its system prompt; nil when it has neither.
func worldOf(lib *promptlib.Library, d domain.Domain, t *trajectory.Trajectory) *promptlib.Parts {
	if c := t.Components; c != nil {
		return &promptlib.Parts{TaskDescription: c.TaskDescription, ActionSpace: c.ActionSpace, InitialState: c.InitialState,
			Demonstrations: trajectory.RenderDemonstrations(c.Demonstrations), SimulationInstruction: c.SimulationInstruction}
	}
	if t.SystemPrompt == "" || lib == nil {
		return nil
	}
	p, _, err := lib.Decompose(d, t.SystemPrompt)
	if err != nil {
		return nil
	}
	return &p
}

// sampleTokens is a rough size of the world-model calls of ts's turns:
// the components, the history before each turn and its observation.
func sampleTokens(ts []*trajectory.Trajectory) int64 {
	n := int64(0)
	for _, t := range ts {
		base := textTokens(t.SystemPrompt) + 500
		if c := t.Components; c != nil {
			base = textTokens(c.TaskDescription) + textTokens(c.ActionSpace) + textTokens(c.InitialState) + textTokens(c.SimulationInstruction) + 500
		}
		hist := int64(0)
		for _, tu := range t.Turns {
			n += base + hist + textTokens(tu.Action) + textTokens(tu.Observation)
			hist += textTokens(tu.Action) + textTokens(tu.Observation)
		}
	}
	return n
}

func turns(ts []*trajectory.Trajectory) int {
	n := 0
	for _, t := range ts {
		n += len(t.Turns)
	}
	return n
}

// EstimateCost applies o's defaults, splits the usable trajectories as Run
// would and counts the worst case: the seed on validation; per iteration a
// parent and a candidate on a minibatch and the candidate on validation;
// the seed and the best on test; with a real check, the seed and every
// candidate once.
func EstimateCost(o Options) Estimate {
	o.defaults()
	data, _, _ := usable(&o)
	sp := Split(data, o.ValFraction, o.TestFraction, o.RandSeed)
	mb, mbTokens := 0, int64(0)
	if len(sp.Train) > 0 {
		k := min(o.Minibatch, len(sp.Train))
		mb = turns(sp.Train) * k / len(sp.Train)
		mbTokens = sampleTokens(sp.Train) * int64(k) / int64(len(sp.Train))
	}
	e := Estimate{Trajectories: len(data), Train: len(sp.Train), Val: len(sp.Val), Test: len(sp.Test), OptimizerCalls: o.Iterations}
	e.Samples = turns(sp.Val) + o.Iterations*(2*mb+turns(sp.Val)) + 2*turns(sp.Test)
	e.TestCalls = 2 * turns(sp.Test) * o.SampleCalls
	if o.Real != nil {
		e.RealCalls = (1 + o.Iterations) * o.Real.Calls()
	}
	e.Calls = e.Samples*o.SampleCalls + e.OptimizerCalls + e.RealCalls
	e.Tokens = (sampleTokens(sp.Val) + int64(o.Iterations)*(2*mbTokens+sampleTokens(sp.Val)) + 2*sampleTokens(sp.Test)) * int64(o.SampleCalls)
	if o.Library != nil {
		if seed, err := o.Library.Get(o.Seed); err == nil {
			// The optimizer reads the template and writes it back.
			e.Tokens += int64(o.Iterations) * (2*textTokens(seed.Templates[string(o.Domain)]) + textTokens(metaPrompt) + int64(o.Worst)*200)
		}
	}
	return e
}
