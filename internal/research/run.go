package research

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Iteration is one journal line: what was proposed and how it scored.
type Iteration struct {
	N         int    `json:"iteration"`
	Parent    string `json:"parent"`
	Candidate string `json:"candidate"`
	Name      string `json:"name"`
	Rationale string `json:"rationale"`
	// ParentMinibatch and CandidateMinibatch are the means on the
	// iteration's train minibatch.
	ParentMinibatch    float64 `json:"parent_minibatch"`
	CandidateMinibatch float64 `json:"candidate_minibatch"`
	Accepted           bool    `json:"accepted"`
	// Rejected says why a candidate was not accepted: "optimizer" (its
	// answer held no usable template, Rationale says why), "template" (it
	// does not compile), "minibatch" (no better than its parent there), or
	// the real check's verdict; "" when accepted. Name is set only on
	// accepted candidates: only they join the library.
	Rejected string `json:"rejected,omitempty"`
	// Real is the candidate's real-environment score, when checked (only
	// minibatch winners are).
	Real *RealScore `json:"real,omitempty"`
	// Val is the candidate's per-trajectory validation scores when accepted.
	Val     map[string]float64 `json:"val,omitempty"`
	ValMean float64            `json:"val_mean,omitempty"`
	// Spent is the run's spend when the iteration ended.
	Spent *Spend `json:"spent,omitempty"`
}

// Status is the iteration's outcome in a word or a score.
func (it *Iteration) Status() string {
	switch {
	case it.Accepted:
		return fmt.Sprintf("accepted, validation %.2f", it.ValMean)
	case it.Rejected != "" && it.Rejected != "minibatch" && it.Rejected != "template" && it.Rejected != "optimizer":
		return "rejected: " + it.Rejected
	}
	return "rejected"
}

// Report is the outcome of a run.
type Report struct {
	Domain   string `json:"domain"`
	Seed     string `json:"seed"`
	SeedName string `json:"seed_name"`
	Best     string `json:"best"`
	BestName string `json:"best_name"`
	// Model, Judge and Optimizer name the models; Offline marks an offline
	// judge's scores, not comparable with the rubric judge's.
	Model     string `json:"model,omitempty"`
	Judge     string `json:"judge,omitempty"`
	Optimizer string `json:"optimizer,omitempty"`
	Offline   bool   `json:"offline,omitempty"`
	// JudgePrompts is the rubric judge's text (Options.JudgePrompts).
	JudgePrompts string `json:"judge_prompts,omitempty"`
	// Splits counts trajectories per split (train, val, test).
	Splits   map[string]int `json:"splits"`
	SeedVal  float64        `json:"seed_val"`
	BestVal  float64        `json:"best_val"`
	SeedTest float64        `json:"seed_test"`
	BestTest float64        `json:"best_test"`
	// Delta is the mean per-trajectory test difference best − seed, with
	// its 95% paired bootstrap interval.
	Delta   float64 `json:"delta"`
	CILow   float64 `json:"ci_low"`
	CIHigh  float64 `json:"ci_high"`
	Wins    int     `json:"wins"`
	Losses  int     `json:"losses"`
	Ties    int     `json:"ties"`
	SignP   float64 `json:"sign_test_p"`
	Improve bool    `json:"improved"`
	// Real is the name of the real trajectories checked; SeedReal and
	// BestReal the two versions' scores on them (nil without a check).
	Real          string     `json:"real,omitempty"`
	RealTolerance float64    `json:"real_tolerance,omitempty"`
	SeedReal      *RealScore `json:"seed_real,omitempty"`
	BestReal      *RealScore `json:"best_real,omitempty"`
	// Limits and Spent are the budget and what the run (resumed runs
	// included) spent of it.
	Limits Limits `json:"limits"`
	Spent  Spend  `json:"spent"`
	// BudgetStop says why the run ended on its budget before its last
	// iteration; "" when it did not.
	BudgetStop string `json:"budget_stop,omitempty"`
	// NoTest says why there is no test comparison; "" when there is.
	NoTest string `json:"no_test,omitempty"`
	// Iterations are the journal's lines.
	Iterations []Iteration `json:"iterations"`
}

// Verdict is the report's one-line answer.
func (r *Report) Verdict() string {
	switch {
	case r.Improve:
		return fmt.Sprintf("improved: %s beats %s on the test split by %+.2f points (95%% CI %+.2f to %+.2f; sign test p=%.3g)", r.BestName, r.SeedName, r.Delta, r.CILow, r.CIHigh, r.SignP)
	case r.Best == r.Seed:
		return "no significant improvement: no candidate beat the seed on validation"
	case r.NoTest != "":
		return fmt.Sprintf("no test comparison: %s (best on validation: %s)", r.NoTest, r.BestName)
	}
	return fmt.Sprintf("no significant improvement: %s vs %s on the test split %+.2f points (95%% CI %+.2f to %+.2f includes zero; sign test p=%.3g)", r.BestName, r.SeedName, r.Delta, r.CILow, r.CIHigh, r.SignP)
}

// OfflineLabel heads every report and log of a run scored offline.
const OfflineLabel = "offline: scored by the rules judge; not comparable with rubric-judge scores"

// WriteText writes the report a user reads.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	if r.Offline {
		b.WriteString(OfflineLabel + "\n")
	}
	fmt.Fprintf(&b, "research %s: seed %s, %d train / %d validation / %d test trajectories\n", r.Domain, r.SeedName, r.Splits["train"], r.Splits["val"], r.Splits["test"])
	if r.Model != "" || r.Judge != "" {
		fmt.Fprintf(&b, "world model %s, judge %s, optimizer %s\n", orDash(r.Model), orDash(r.Judge), orDash(r.Optimizer))
	}
	if r.JudgePrompts != "" {
		fmt.Fprintf(&b, "judge prompts: %s\n", r.JudgePrompts)
	}
	real := r.Real != ""
	fmt.Fprintf(&b, "%-4s %-6s %-12s %-12s %9s %9s %8s", "iter", "name", "candidate", "parent", "parent-mb", "cand-mb", "val")
	if real {
		fmt.Fprintf(&b, " %8s", "real-div")
	}
	b.WriteString("\n")
	for _, it := range r.Iterations {
		val := "rejected"
		if it.Accepted {
			val = fmt.Sprintf("%.2f", it.ValMean)
		}
		fmt.Fprintf(&b, "%-4d %-6s %-12.12s %-12.12s %9.2f %9.2f %8s", it.N, it.Name, it.Candidate, it.Parent, it.ParentMinibatch, it.CandidateMinibatch, val)
		if real {
			fmt.Fprintf(&b, " %8s", it.Real)
		}
		fmt.Fprintf(&b, "  %s\n", firstLine(it.Rationale))
		if s := it.Status(); strings.HasPrefix(s, "rejected: ") {
			fmt.Fprintf(&b, "     %s\n", s)
		}
	}
	fmt.Fprintf(&b, "validation: seed %.2f, best %s %.2f\n", r.SeedVal, r.BestName, r.BestVal)
	if real {
		fmt.Fprintf(&b, "real divergence on %s (lower is better, tolerance %.2f): seed %s, best %s\n", r.Real, r.RealTolerance, r.SeedReal, r.BestReal)
	}
	fmt.Fprintf(&b, "spent: %s\n", r.Spent.String(r.Limits))
	if r.BudgetStop != "" {
		fmt.Fprintf(&b, "ended on budget after %d iterations: %s\n", len(r.Iterations), r.BudgetStop)
	}
	if r.NoTest == "" {
		fmt.Fprintf(&b, "test: seed %.2f, best %.2f; wins %d, losses %d, ties %d\n", r.SeedTest, r.BestTest, r.Wins, r.Losses, r.Ties)
	}
	b.WriteString(r.Verdict() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// candidate is a version in the pool with its validation scores.
type candidate struct {
	v    *promptlib.Version
	val  map[string]float64
	real *RealScore
}

// checkHeader refuses to resume a journal written with other settings:
// its scores would not be comparable with the new ones.
func checkHeader(old, cur *Header) error {
	type field struct{ name, was, is string }
	for _, f := range []field{
		{"domain", old.Domain, cur.Domain}, {"seed version", old.Seed, cur.Seed},
		{"seed", fmt.Sprint(old.RandSeed), fmt.Sprint(cur.RandSeed)},
		{"world model", old.Model, cur.Model}, {"judge", old.Judge, cur.Judge},
		{"optimizer", old.Optimizer, cur.Optimizer}, {"real trajectories", old.Real, cur.Real},
	} {
		if f.was != f.is {
			return fmt.Errorf("the journal was written with %s %q, this run has %q: use another output directory", f.name, f.was, f.is)
		}
	}
	return nil
}

// budgetStopped reports whether err, or the cancellation of ctx, is the
// budget's.
func budgetStopped(ctx context.Context, err error) bool {
	return errors.Is(err, ErrBudget) || errors.Is(context.Cause(ctx), ErrBudget)
}

// Run searches and reports. Iterations in o.Resume are not evaluated again
// and its spend counts against o.Budget. A run whose budget runs out ends
// cleanly: the report says so and compares the best candidate so far with
// the seed on the test split, whose cost was held back, when it can.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	usableData, worlds, skipped := usable(&o)
	var data []*trajectory.Trajectory
	for _, t := range usableData {
		c := *t
		if c.Components != nil {
			c.SystemPrompt = "" // rendered from components by each version
		}
		data = append(data, &c)
	}
	sp := Split(data, o.ValFraction, o.TestFraction, o.RandSeed)
	if len(sp.Train) == 0 || len(sp.Val) == 0 || len(sp.Test) == 0 {
		return nil, fmt.Errorf("%w: %d trajectories of domain %s with components or a system prompt they can be recovered from (%d without either) give %d train, %d validation, %d test",
			ErrNoData, len(data), o.Domain, skipped, len(sp.Train), len(sp.Val), len(sp.Test))
	}
	resume := o.Resume
	if resume == nil {
		resume = &Journal{}
	}
	if o.Seed == "" && resume.Header != nil {
		// A promote since then must not change what the run started from.
		o.Seed = resume.Header.Seed
	}
	seed, err := o.Library.Get(o.Seed)
	if err != nil {
		return nil, err
	}
	if _, ok := seed.Templates[string(o.Domain)]; !ok {
		return nil, fmt.Errorf("seed version %s has no template for domain %s", seed.Name, o.Domain)
	}
	hdr := &Header{Domain: string(o.Domain), Seed: seed.ID, RandSeed: o.RandSeed, Model: o.ModelName, Judge: o.JudgeName, Optimizer: o.OptimizerName, Offline: o.Offline, Real: o.RealName}
	jr := newJournal(o.Journal)
	if resume.Header != nil {
		if err := checkHeader(resume.Header, hdr); err != nil {
			return nil, err
		}
	} else if len(resume.Iterations) == 0 && resume.Spent.Calls == 0 {
		jr.write(journalLine{Header: hdr})
	}
	b := o.Budget
	if b == nil {
		b = NewBudget(Limits{})
	}
	b.restore(resume.Spent, resume.nextCall, jr, o.Progress, o.ProgressCalls)

	rep := &Report{Domain: string(o.Domain), Seed: seed.ID, SeedName: seed.Name, Model: o.ModelName, Judge: o.JudgeName, Optimizer: o.OptimizerName, Offline: o.Offline, JudgePrompts: o.JudgePrompts,
		Splits: map[string]int{"train": len(sp.Train), "val": len(sp.Val), "test": len(sp.Test)}, Limits: b.Limits()}
	if o.Real != nil {
		rep.Real, rep.RealTolerance = o.RealName, o.RealTolerance
	}
	pool := []candidate{{v: seed}}

	// The search runs with the test split's calls held back, unless the
	// cap is too small to hold them at all.
	reserve := 2 * turns(sp.Test) * o.SampleCalls
	if l := b.Limits().Calls; l > 0 && reserve >= l {
		reserve = 0
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b.phase(cancel, reserve)
	search := func() error {
		ev, err := o.Evaluator.Evaluate(sctx, seed, o.Domain, sp.Val)
		if err != nil {
			return fmt.Errorf("seed on validation: %w", err)
		}
		pool[0].val = ev.PerTrajectory
		if o.Real != nil {
			if pool[0].real, err = o.Real.Divergence(sctx, seed, o.Domain); err != nil {
				return fmt.Errorf("seed on the real trajectories: %w", err)
			}
		}
		for i := 0; i < o.Iterations; i++ {
			if i < len(resume.Iterations) {
				it := resume.Iterations[i]
				if it.Accepted {
					v, err := o.Library.Get(it.Candidate)
					if err != nil {
						return fmt.Errorf("journal iteration %d: %w", i, err)
					}
					pool = append(pool, candidate{v, it.Val, it.Real})
				}
				rep.Iterations = append(rep.Iterations, it)
				continue
			}
			it, c, err := iterate(sctx, &o, i, sp.Train, sp.Val, pool, worlds)
			if err != nil {
				return fmt.Errorf("iteration %d: %w", i, err)
			}
			if c != nil {
				pool = append(pool, *c)
			}
			spent := b.Spent()
			it.Spent = &spent
			jr.write(it)
			if err := jr.Err(); err != nil {
				return err
			}
			rep.Iterations = append(rep.Iterations, *it)
			fmt.Fprintf(o.Progress, "research: iteration %d/%d %s %s; spent %s\n", i+1, o.Iterations, orDash(it.Name), it.Status(), spent.String(b.Limits()))
			o.Logger.Info("research iteration", "n", i, "candidate", it.Name, "accepted", it.Accepted, "val", it.ValMean, "calls", spent.Calls, "tokens", spent.Tokens)
		}
		return nil
	}
	if err := search(); err != nil {
		if !budgetStopped(sctx, err) || ctx.Err() != nil {
			return nil, err
		}
		rep.BudgetStop = strings.TrimPrefix(context.Cause(sctx).Error(), ErrBudget.Error()+": ")
		st := &Stop{Iteration: len(rep.Iterations), Reason: rep.BudgetStop, Limits: b.Limits(), Spent: b.Spent()}
		jr.write(journalLine{Stop: st})
		fmt.Fprintf(o.Progress, "research: ended on budget before iteration %d: %s\n", st.Iteration+1, st.Reason)
		o.Logger.Warn("research ended on budget", "iteration", st.Iteration, "reason", st.Reason)
	}
	cancel(nil)

	best := pool[0]
	for _, c := range pool[1:] {
		if mean(c.val) > mean(best.val) {
			best = c
		}
	}
	rep.Best, rep.BestName, rep.SeedVal, rep.BestVal = best.v.ID, best.v.Name, mean(pool[0].val), mean(best.val)
	rep.SeedReal, rep.BestReal = pool[0].real, best.real
	if err := test(ctx, &o, b, sp.Test, seed, best.v, rep); err != nil {
		return nil, err
	}
	rep.Spent = b.Spent()
	return rep, jr.Err()
}

// test compares best with seed on the test split, under the whole budget.
func test(ctx context.Context, o *Options, b *Budget, ts []*trajectory.Trajectory, seed, best *promptlib.Version, rep *Report) error {
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b.phase(cancel, 0)
	seedTest, err := o.Evaluator.Evaluate(tctx, seed, o.Domain, ts)
	bestTest := seedTest
	if err == nil && best != seed {
		bestTest, err = o.Evaluator.Evaluate(tctx, best, o.Domain, ts)
	}
	if err != nil {
		if budgetStopped(tctx, err) && ctx.Err() == nil {
			rep.NoTest = "the budget could not afford the test split: " + strings.TrimPrefix(context.Cause(tctx).Error(), ErrBudget.Error()+": ")
			jr := b.journal
			jr.write(journalLine{Stop: &Stop{Iteration: len(rep.Iterations), Reason: rep.NoTest, Limits: b.Limits(), Spent: b.Spent()}})
			return nil
		}
		return fmt.Errorf("test split: %w", err)
	}
	rep.SeedTest, rep.BestTest = mean(seedTest.PerTrajectory), mean(bestTest.PerTrajectory)
	var diffs []float64
	for _, t := range ts {
		a, okA := seedTest.PerTrajectory[t.ID]
		b, okB := bestTest.PerTrajectory[t.ID]
		if okA && okB {
			diffs = append(diffs, b-a)
		}
	}
	rep.Delta, rep.CILow, rep.CIHigh = Bootstrap(diffs, o.Resamples, o.RandSeed)
	rep.Wins, rep.Losses, rep.Ties, rep.SignP = SignTest(diffs)
	rep.Improve = best != seed && rep.CILow > 0
	return nil
}

// iterate runs one iteration: draw a parent from the Pareto front, score
// it on a minibatch, ask for an edit, score the edit, and on a minibatch
// win check it on the real trajectories (when configured) and score it on
// validation.
func iterate(ctx context.Context, o *Options, i int, train, val []*trajectory.Trajectory, pool []candidate, worlds map[string]*promptlib.Parts) (*Iteration, *candidate, error) {
	front := paretoFront(pool, val)
	parent := front[rng(o.RandSeed, "parent", i).IntN(len(front))].v
	mb := minibatch(train, o.Minibatch, rng(o.RandSeed, "minibatch", i))
	pe, err := o.Evaluator.Evaluate(ctx, parent, o.Domain, mb)
	if err != nil {
		return nil, nil, fmt.Errorf("parent %s on minibatch: %w", parent.Name, err)
	}
	worst := append([]Sample(nil), pe.Samples...)
	sort.SliceStable(worst, func(a, b int) bool { return worst[a].Score < worst[b].Score })
	if len(worst) > o.Worst {
		worst = worst[:o.Worst]
	}
	byID := map[string]*trajectory.Trajectory{}
	for _, t := range mb {
		byID[t.ID] = t
	}
	for k := range worst {
		withCase(&worst[k], byID[worst[k].Trajectory], worlds)
	}
	prop, err := o.Optimizer.Propose(ctx, OptimizeRequest{Domain: o.Domain, Template: parent.Templates[string(o.Domain)], Score: mean(pe.PerTrajectory), Worst: worst})
	if errors.Is(err, ErrUnusableAnswer) {
		// The optimizer answered, but nothing in the answer can be tried:
		// a rejected proposal, not a failed run.
		return &Iteration{N: i, Parent: parent.ID, Rationale: "(rejected: " + err.Error() + ")", Rejected: "optimizer", ParentMinibatch: mean(pe.PerTrajectory)}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("optimizer: %w", err)
	}
	child, err := parent.With(o.Domain, prop.Template, "", prop.Rationale)
	if err != nil {
		// An unusable template is a rejected proposal, not a failed run.
		return &Iteration{N: i, Parent: parent.ID, Rationale: prop.Rationale + "\n(rejected: " + err.Error() + ")", Rejected: "template", ParentMinibatch: mean(pe.PerTrajectory)}, nil, nil
	}
	// The candidate joins the library, and gets a version name, only once
	// accepted: a name is a version someone may select, and most
	// proposals lose.
	it := &Iteration{N: i, Parent: parent.ID, Candidate: child.ID, Rationale: prop.Rationale, ParentMinibatch: mean(pe.PerTrajectory)}
	ce, err := o.Evaluator.Evaluate(ctx, child, o.Domain, mb)
	if err != nil {
		return nil, nil, fmt.Errorf("candidate %s on minibatch: %w", child.Name, err)
	}
	it.CandidateMinibatch = mean(ce.PerTrajectory)
	if it.CandidateMinibatch <= it.ParentMinibatch {
		it.Rejected = "minibatch"
		return it, nil, nil
	}
	if o.Real != nil {
		if it.Real, err = o.Real.Divergence(ctx, child, o.Domain); err != nil {
			return nil, nil, fmt.Errorf("candidate %s on the real trajectories: %w", child.Name, err)
		}
		if why := realVerdict(it.Real, pool[0].real, o.RealTolerance); why != "" {
			it.Rejected = why
			return it, nil, nil
		}
	}
	vv, err := o.Evaluator.Evaluate(ctx, child, o.Domain, val)
	if err != nil {
		return nil, nil, fmt.Errorf("candidate %s on validation: %w", child.Name, err)
	}
	if child, err = o.Library.Add(child); err != nil {
		return nil, nil, err
	}
	it.Name = child.Name
	it.Accepted, it.Val, it.ValMean = true, vv.PerTrajectory, mean(vv.PerTrajectory)
	return it, &candidate{child, vv.PerTrajectory, it.Real}, nil
}

// withCase fills what the optimizer reads of a sample from its
// trajectory: the action, the turns before it and the world.
func withCase(s *Sample, t *trajectory.Trajectory, worlds map[string]*promptlib.Parts) {
	if t == nil {
		return
	}
	if s.Turn >= 1 && s.Turn <= len(t.Turns) {
		s.Action = t.Turns[s.Turn-1].Action
		s.History = t.Turns[:s.Turn-1]
	}
	s.World = worlds[t.ID]
}

// paretoFront is the candidates best (or tied best) on at least one
// validation trajectory, in pool order: GEPA's per-instance front, which
// keeps a candidate that is best somewhere even when its mean is not.
func paretoFront(pool []candidate, val []*trajectory.Trajectory) []candidate {
	keep := make([]bool, len(pool))
	for _, t := range val {
		best := math.Inf(-1)
		for _, c := range pool {
			if s, ok := c.val[t.ID]; ok && s > best {
				best = s
			}
		}
		for i, c := range pool {
			if s, ok := c.val[t.ID]; ok && s == best {
				keep[i] = true
			}
		}
	}
	var out []candidate
	for i, c := range pool {
		if keep[i] {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return pool[:1]
	}
	return out
}

func minibatch(train []*trajectory.Trajectory, n int, r interface{ Perm(int) []int }) []*trajectory.Trajectory {
	if n >= len(train) {
		return train
	}
	out := make([]*trajectory.Trajectory, 0, n)
	for _, i := range r.Perm(len(train))[:n] {
		out = append(out, train[i])
	}
	return out
}
