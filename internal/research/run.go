package research

import (
	"bufio"
	"context"
	"encoding/json"
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
	// Val is the candidate's per-trajectory validation scores when accepted.
	Val     map[string]float64 `json:"val,omitempty"`
	ValMean float64            `json:"val_mean,omitempty"`
}

// ReadJournal reads the iterations an earlier run wrote. A torn last line
// (the run was killed while writing it) is dropped: that iteration is
// simply done again.
func ReadJournal(r io.Reader) ([]Iteration, error) {
	var out []Iteration
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		var it Iteration
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			if !sc.Scan() { // the last line: torn by a kill
				break
			}
			return nil, fmt.Errorf("journal line %d: %w", line, err)
		}
		if it.N != len(out) {
			return nil, fmt.Errorf("journal line %d: iteration %d, want %d", line, it.N, len(out))
		}
		out = append(out, it)
	}
	return out, sc.Err()
}

// Report is the outcome of a run.
type Report struct {
	Domain   string `json:"domain"`
	Seed     string `json:"seed"`
	SeedName string `json:"seed_name"`
	Best     string `json:"best"`
	BestName string `json:"best_name"`
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
	// Iterations are the journal's lines.
	Iterations []Iteration `json:"iterations"`
}

// Verdict is the report's one-line answer.
func (r *Report) Verdict() string {
	if r.Improve {
		return fmt.Sprintf("improved: %s beats %s on the test split by %+.2f points (95%% CI %+.2f to %+.2f; sign test p=%.3g)", r.BestName, r.SeedName, r.Delta, r.CILow, r.CIHigh, r.SignP)
	}
	if r.Best == r.Seed {
		return "no significant improvement: no candidate beat the seed on validation"
	}
	return fmt.Sprintf("no significant improvement: %s vs %s on the test split %+.2f points (95%% CI %+.2f to %+.2f includes zero; sign test p=%.3g)", r.BestName, r.SeedName, r.Delta, r.CILow, r.CIHigh, r.SignP)
}

// WriteText writes the report a user reads.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "research %s: seed %s, %d train / %d validation / %d test trajectories\n", r.Domain, r.SeedName, r.Splits["train"], r.Splits["val"], r.Splits["test"])
	fmt.Fprintf(&b, "%-4s %-6s %-12s %-12s %9s %9s %8s\n", "iter", "name", "candidate", "parent", "parent-mb", "cand-mb", "val")
	for _, it := range r.Iterations {
		val := "rejected"
		if it.Accepted {
			val = fmt.Sprintf("%.2f", it.ValMean)
		}
		fmt.Fprintf(&b, "%-4d %-6s %-12.12s %-12.12s %9.2f %9.2f %8s  %s\n", it.N, it.Name, it.Candidate, it.Parent, it.ParentMinibatch, it.CandidateMinibatch, val, firstLine(it.Rationale))
	}
	fmt.Fprintf(&b, "validation: seed %.2f, best %s %.2f\n", r.SeedVal, r.BestName, r.BestVal)
	fmt.Fprintf(&b, "test: seed %.2f, best %.2f; wins %d, losses %d, ties %d\n", r.SeedTest, r.BestTest, r.Wins, r.Losses, r.Ties)
	b.WriteString(r.Verdict() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// candidate is a version in the pool with its validation scores.
type candidate struct {
	v   *promptlib.Version
	val map[string]float64
}

// Run searches and reports. Iterations in o.Resume are not evaluated again.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	var data []*trajectory.Trajectory
	for _, t := range o.Trajectories {
		if t.Domain == string(o.Domain) && t.Components != nil {
			c := *t
			c.SystemPrompt = "" // rendered from components by each version
			data = append(data, &c)
		}
	}
	sp := Split(data, o.ValFraction, o.TestFraction, o.RandSeed)
	if len(sp.Train) == 0 || len(sp.Val) == 0 || len(sp.Test) == 0 {
		return nil, fmt.Errorf("%w: %d of domain %s with components give %d train, %d validation, %d test", ErrNoData, len(data), o.Domain, len(sp.Train), len(sp.Val), len(sp.Test))
	}
	seed, err := o.Library.Get(o.Seed)
	if err != nil {
		return nil, err
	}
	if _, ok := seed.Templates[string(o.Domain)]; !ok {
		return nil, fmt.Errorf("seed version %s has no template for domain %s", seed.Name, o.Domain)
	}
	ev, err := o.Evaluator.Evaluate(ctx, seed, o.Domain, sp.Val)
	if err != nil {
		return nil, fmt.Errorf("seed on validation: %w", err)
	}
	pool := []candidate{{seed, ev.PerTrajectory}}
	rep := &Report{Domain: string(o.Domain), Seed: seed.ID, SeedName: seed.Name, SeedVal: mean(ev.PerTrajectory),
		Splits: map[string]int{"train": len(sp.Train), "val": len(sp.Val), "test": len(sp.Test)}}
	enc := json.NewEncoder(io.Discard)
	if o.Journal != nil {
		enc = json.NewEncoder(o.Journal)
	}
	for i := 0; i < o.Iterations; i++ {
		if i < len(o.Resume) {
			it := o.Resume[i]
			if it.Accepted {
				v, err := o.Library.Get(it.Candidate)
				if err != nil {
					return nil, fmt.Errorf("journal iteration %d: %w", i, err)
				}
				pool = append(pool, candidate{v, it.Val})
			}
			rep.Iterations = append(rep.Iterations, it)
			continue
		}
		it, c, err := iterate(ctx, &o, i, sp.Train, sp.Val, pool)
		if err != nil {
			return nil, fmt.Errorf("iteration %d: %w", i, err)
		}
		if c != nil {
			pool = append(pool, *c)
		}
		if err := enc.Encode(it); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		rep.Iterations = append(rep.Iterations, *it)
		o.Logger.Info("research iteration", "n", i, "candidate", it.Name, "accepted", it.Accepted, "val", it.ValMean)
	}
	best := pool[0]
	for _, c := range pool[1:] {
		if mean(c.val) > mean(best.val) {
			best = c
		}
	}
	rep.Best, rep.BestName, rep.BestVal = best.v.ID, best.v.Name, mean(best.val)
	seedTest, err := o.Evaluator.Evaluate(ctx, seed, o.Domain, sp.Test)
	if err != nil {
		return nil, fmt.Errorf("seed on test: %w", err)
	}
	bestTest := seedTest
	if best.v != seed {
		if bestTest, err = o.Evaluator.Evaluate(ctx, best.v, o.Domain, sp.Test); err != nil {
			return nil, fmt.Errorf("best on test: %w", err)
		}
	}
	rep.SeedTest, rep.BestTest = mean(seedTest.PerTrajectory), mean(bestTest.PerTrajectory)
	var diffs []float64
	for _, t := range sp.Test {
		a, okA := seedTest.PerTrajectory[t.ID]
		b, okB := bestTest.PerTrajectory[t.ID]
		if okA && okB {
			diffs = append(diffs, b-a)
		}
	}
	rep.Delta, rep.CILow, rep.CIHigh = Bootstrap(diffs, o.Resamples, o.RandSeed)
	rep.Wins, rep.Losses, rep.Ties, rep.SignP = SignTest(diffs)
	rep.Improve = best.v != seed && rep.CILow > 0
	return rep, nil
}

// iterate runs one iteration: draw a parent from the Pareto front, score
// it on a minibatch, ask for an edit, score the edit, and on a minibatch
// win score it on validation.
func iterate(ctx context.Context, o *Options, i int, train, val []*trajectory.Trajectory, pool []candidate) (*Iteration, *candidate, error) {
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
	prop, err := o.Optimizer.Propose(ctx, OptimizeRequest{Domain: o.Domain, Template: parent.Templates[string(o.Domain)], Score: mean(pe.PerTrajectory), Worst: worst})
	if err != nil {
		return nil, nil, fmt.Errorf("optimizer: %w", err)
	}
	child, err := parent.With(o.Domain, prop.Template, "", prop.Rationale)
	if err != nil {
		// An unusable template is a rejected proposal, not a failed run.
		return &Iteration{N: i, Parent: parent.ID, Rationale: prop.Rationale + "\n(rejected: " + err.Error() + ")", ParentMinibatch: mean(pe.PerTrajectory)}, nil, nil
	}
	if child, err = o.Library.Add(child); err != nil {
		return nil, nil, err
	}
	it := &Iteration{N: i, Parent: parent.ID, Candidate: child.ID, Name: child.Name, Rationale: prop.Rationale, ParentMinibatch: mean(pe.PerTrajectory)}
	ce, err := o.Evaluator.Evaluate(ctx, child, o.Domain, mb)
	if err != nil {
		return nil, nil, fmt.Errorf("candidate %s on minibatch: %w", child.Name, err)
	}
	it.CandidateMinibatch = mean(ce.PerTrajectory)
	if it.CandidateMinibatch <= it.ParentMinibatch {
		return it, nil, nil
	}
	vv, err := o.Evaluator.Evaluate(ctx, child, o.Domain, val)
	if err != nil {
		return nil, nil, fmt.Errorf("candidate %s on validation: %w", child.Name, err)
	}
	it.Accepted, it.Val, it.ValMean = true, vv.PerTrajectory, mean(vv.PerTrajectory)
	return it, &candidate{child, vv.PerTrajectory}, nil
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
