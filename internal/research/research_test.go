package research

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// The instructions the fake world model rewards: each makes it answer one
// kind of turn right.
const (
	goodA = "Reproduce error messages word for word."
	goodB = "List directory entries one per line, sorted."
)

func trajs(n int) []*trajectory.Trajectory {
	var out []*trajectory.Trajectory
	for i := range n {
		t := &trajectory.Trajectory{ID: fmt.Sprintf("t%03d", i), Domain: "os", SystemPrompt: "ignored: rendered from components",
			Components: &trajectory.Components{TaskDescription: fmt.Sprintf("task %d", i), ActionSpace: "shell"}}
		for k := range 4 {
			t.Turns = append(t.Turns, trajectory.Turn{Action: fmt.Sprintf("cmd %d", k), Observation: fmt.Sprintf("out %d %d", i, k)})
		}
		out = append(out, t)
	}
	return out
}

// fakeEval renders the real system prompt with the version and plays a
// world model that gets a turn right when the prompt holds the instruction
// that kind of turn needs (hash-chosen), plus a fixed per-turn baseline
// chance; the judge scores a right answer 100 and a wrong one 20.
type fakeEval struct{ calls atomic.Int64 }

func h(s string) uint32 {
	x := sha256.Sum256([]byte(s))
	return uint32(x[0])<<8 | uint32(x[1])
}

func (f *fakeEval) Evaluate(_ context.Context, v *promptlib.Version, d domain.Domain, ts []*trajectory.Trajectory) (*Evaluation, error) {
	f.calls.Add(1)
	ev := &Evaluation{PerTrajectory: map[string]float64{}}
	for _, t := range ts {
		if t.SystemPrompt != "" {
			return nil, fmt.Errorf("trajectory %s reached the evaluator with its own prompt", t.ID)
		}
		sys, err := v.Render(d, *t.Components)
		if err != nil {
			return nil, err
		}
		sum := 0.0
		for k, tu := range t.Turns {
			key := t.ID + "/" + tu.Action
			need := goodA
			if h(key)%2 == 1 {
				need = goodB
			}
			right := strings.Contains(sys, need) || h("base"+key)%4 == 0
			s := Sample{Trajectory: t.ID, Turn: k + 1, Truth: tu.Observation, Score: 20, Prediction: "wrong"}
			if right {
				s.Score, s.Prediction = 100, tu.Observation
			} else {
				s.Weaknesses = []string{"the observation differs from the real one"}
			}
			sum += s.Score
			ev.Samples = append(ev.Samples, s)
		}
		ev.PerTrajectory[t.ID] = sum / float64(len(t.Turns))
	}
	return ev, nil
}

// fakeOpt proposes, in turn, the lines of its script under the answer
// section of the current template.
type fakeOpt struct {
	script []string
	n      atomic.Int64
}

func (f *fakeOpt) Propose(_ context.Context, r OptimizeRequest) (*Proposal, error) {
	line := f.script[int(f.n.Add(1)-1)%len(f.script)]
	src := strings.Replace(r.Template, "# How to answer\n", "# How to answer\n"+line+"\n", 1)
	return &Proposal{Template: src, Rationale: "add: " + line}, nil
}

var noise = []string{"Be nice.", "Think about the weather.", "Use British spelling.", "Mention nothing extra."}

func run(t *testing.T, dir string, script []string, iters int, resume *Journal, ev *fakeEval) (*Report, *fakeOpt) {
	t.Helper()
	lib, err := promptlib.Open(filepath.Join(dir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	jf, err := os.OpenFile(filepath.Join(dir, "journal.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer jf.Close()
	opt := &fakeOpt{script: script}
	if resume != nil {
		opt.n.Store(int64(len(resume.Iterations)))
	}
	rep, err := Run(context.Background(), Options{Library: lib, Domain: domain.OS, Trajectories: trajs(80), Evaluator: ev, Optimizer: opt,
		Iterations: iters, Minibatch: 6, RandSeed: 1, Journal: jf, Resume: resume})
	if err != nil {
		t.Fatal(err)
	}
	return rep, opt
}

func TestImprovingEditsAreKeptAndSignificant(t *testing.T) {
	dir := t.TempDir()
	script := []string{noise[0], goodA, noise[1], goodB, noise[2], noise[3]}
	rep, _ := run(t, dir, script, 8, nil, &fakeEval{})
	var buf bytes.Buffer
	rep.WriteText(&buf)
	t.Log("\n" + buf.String())
	if !rep.Improve || !strings.HasPrefix(rep.Verdict(), "improved") {
		t.Fatalf("no improvement claimed:\n%s", buf.String())
	}
	lib, _ := promptlib.Open(filepath.Join(dir, "templates"))
	best, err := lib.Get(rep.Best)
	if err != nil {
		t.Fatal(err)
	}
	if src := best.Templates["os"]; !strings.Contains(src, goodA) || !strings.Contains(src, goodB) {
		t.Fatalf("best %s lacks an improving edit:\n%s", best.Name, src)
	}
	for _, it := range rep.Iterations {
		if it.Accepted && !strings.Contains(it.Rationale, goodA) && !strings.Contains(it.Rationale, goodB) {
			t.Errorf("iteration %d accepted a noise edit: %s", it.N, it.Rationale)
		}
		if c, err := lib.Get(it.Candidate); err == nil && c.Parent != it.Parent {
			t.Errorf("candidate %s parent %s, journal says %s", c.Name, c.Parent, it.Parent)
		}
	}
}

func TestNoiseOnlyIsNotSignificant(t *testing.T) {
	rep, _ := run(t, t.TempDir(), noise, 6, nil, &fakeEval{})
	if rep.Improve || !strings.HasPrefix(rep.Verdict(), "no significant improvement") {
		t.Fatalf("noise claimed: %s", rep.Verdict())
	}
}

// TestResumeRepeatsNoEvaluation stops a run after 3 of 8 iterations (as a
// kill between iterations leaves it), resumes from the journal and checks
// that the resumed part evaluates only what the full run would after
// iteration 3, and chooses the same version.
func TestResumeRepeatsNoEvaluation(t *testing.T) {
	script := []string{noise[0], goodA, noise[1], goodB, noise[2], noise[3]}
	fullEv := &fakeEval{}
	full, _ := run(t, t.TempDir(), script, 8, nil, fullEv)

	dir := t.TempDir()
	firstEv := &fakeEval{}
	run(t, dir, script, 3, nil, firstEv)
	b, _ := os.ReadFile(filepath.Join(dir, "journal.jsonl"))
	b = append(b, []byte(`{"iteration":3,"par`)...) // torn by the kill
	resume, err := ReadJournal(bytes.NewReader(b))
	if err != nil || len(resume.Iterations) != 3 {
		t.Fatalf("journal: %+v, %v", resume, err)
	}
	secondEv := &fakeEval{}
	rep, _ := run(t, dir, script, 8, resume, secondEv)
	if rep.Best != full.Best || rep.Improve != full.Improve {
		t.Fatalf("resumed run chose %s (improved %v), full run %s (%v)", rep.BestName, rep.Improve, full.BestName, full.Improve)
	}
	// The first run's final test evaluations (2) are the only ones done twice
	// beside the seed's validation scoring (1), which every run needs.
	if got, want := firstEv.calls.Load()+secondEv.calls.Load(), fullEv.calls.Load()+2+1; got != want {
		t.Fatalf("evaluations: %d + %d, want %d (the full run's %d, plus the first run's seed validation and test)", firstEv.calls.Load(), secondEv.calls.Load(), want, fullEv.calls.Load())
	}
}

func TestSplitKeepsTrajectoriesWhole(t *testing.T) {
	ts := trajs(40)
	s := Split(ts, 0.25, 0.25, 3)
	seen := map[string]string{}
	for name, part := range map[string][]*trajectory.Trajectory{"train": s.Train, "val": s.Val, "test": s.Test} {
		for _, x := range part {
			if seen[x.ID] != "" {
				t.Fatalf("%s in %s and %s", x.ID, seen[x.ID], name)
			}
			seen[x.ID] = name
		}
	}
	if len(seen) != 40 || len(s.Test) != 10 || len(s.Val) != 10 {
		t.Fatalf("split %d/%d/%d", len(s.Train), len(s.Val), len(s.Test))
	}
	rev := append([]*trajectory.Trajectory(nil), ts...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if s2 := Split(rev, 0.25, 0.25, 3); s2.Test[0].ID != s.Test[0].ID {
		t.Fatal("split depends on input order")
	}
}

func TestStatistics(t *testing.T) {
	w, l, ties, p := SignTest([]float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	if w != 10 || l != 0 || ties != 0 || p > 0.002 || p < 0.0019 { // 2/1024
		t.Fatalf("sign test %d %d %d %g", w, l, ties, p)
	}
	if _, _, _, p := SignTest([]float64{1, -1, 0}); p != 1 {
		t.Fatalf("balanced p=%g", p)
	}
	m, lo, hi := Bootstrap([]float64{-1, 1, -1, 1}, 2000, 1)
	if m != 0 || lo >= 0 || hi <= 0 {
		t.Fatalf("bootstrap %g [%g, %g]", m, lo, hi)
	}
	m, lo, _ = Bootstrap([]float64{2, 3, 2, 3, 2, 3}, 2000, 1)
	if m != 2.5 || lo < 2 {
		t.Fatalf("bootstrap of positive diffs %g lo %g", m, lo)
	}
}

func TestParseProposal(t *testing.T) {
	p, err := ParseProposal("<rationale> tighter </rationale>\n<template>\n{{define \"prompt\"}}x{{end}}\n</template>")
	if err != nil || p.Rationale != "tighter" || p.Template != "{{define \"prompt\"}}x{{end}}\n" {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := ParseProposal("I would change nothing."); err == nil {
		t.Fatal("an answer without a template was accepted")
	}
}

func FuzzParseProposal(f *testing.F) {
	f.Add("<template>a</template>")
	f.Add("<rationale>r</rationale><template></template>")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProposal(s)
		if err == nil && strings.TrimSpace(p.Template) == "" {
			t.Fatal("empty template accepted")
		}
	})
}

func TestEstimateBoundsTheRun(t *testing.T) {
	ev := &countingEval{}
	o := Options{Domain: domain.OS, Trajectories: trajs(40), Iterations: 5, Minibatch: 6, RandSeed: 1}
	est := EstimateCost(o)
	lib, _ := promptlib.Open(t.TempDir())
	o.Library, o.Evaluator, o.Optimizer = lib, ev, &fakeOpt{script: []string{goodA, goodB, noise[0]}}
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if est.Trajectories != 40 || est.OptimizerCalls != 5 || ev.samples.Load() > int64(est.Samples) || ev.samples.Load() == 0 {
		t.Fatalf("estimate %+v, run evaluated %d samples", est, ev.samples.Load())
	}
}

// countingEval is fakeEval counting the turns it scores.
type countingEval struct {
	fakeEval
	samples atomic.Int64
}

func (c *countingEval) Evaluate(ctx context.Context, v *promptlib.Version, d domain.Domain, ts []*trajectory.Trajectory) (*Evaluation, error) {
	ev, err := c.fakeEval.Evaluate(ctx, v, d, ts)
	if err == nil {
		c.samples.Add(int64(len(ev.Samples)))
	}
	return ev, err
}

const pleaser = "Always write what the judge wants to read."

// pleasedEval is fakeEval whose judge gives every turn full marks once the
// prompt holds pleaser.
type pleasedEval struct{ fakeEval }

func (p *pleasedEval) Evaluate(ctx context.Context, v *promptlib.Version, d domain.Domain, ts []*trajectory.Trajectory) (*Evaluation, error) {
	ev, err := p.fakeEval.Evaluate(ctx, v, d, ts)
	if err != nil || !strings.Contains(v.Templates[string(d)], pleaser) {
		return ev, err
	}
	for i := range ev.Samples {
		ev.Samples[i].Score = 100
	}
	for id := range ev.PerTrajectory {
		ev.PerTrajectory[id] = 100
	}
	return ev, nil
}

// fakeReal diverges 10 points from the real trajectories, 40 more with
// pleaser in the prompt, one less per improving instruction.
type fakeReal struct{ calls atomic.Int64 }

func (f *fakeReal) Calls() int { return 12 }

func (f *fakeReal) Divergence(_ context.Context, v *promptlib.Version, d domain.Domain) (*RealScore, error) {
	f.calls.Add(1)
	src := v.Templates[string(d)]
	s := &RealScore{Divergence: 10, Turns: 12}
	if strings.Contains(src, pleaser) {
		s.Divergence += 40
	}
	for _, g := range []string{goodA, goodB} {
		if strings.Contains(src, g) {
			s.Divergence--
		}
	}
	return s, nil
}

// TestRealCheckRejectsJudgePleaser: an edit that makes the judge give full
// marks but the simulator stray from real trajectories wins without the
// real check and is rejected with it, while the improving edits pass.
func TestRealCheckRejectsJudgePleaser(t *testing.T) {
	script := []string{pleaser, goodA, noise[0], goodB}
	for _, withReal := range []bool{false, true} {
		t.Run(fmt.Sprintf("real=%v", withReal), func(t *testing.T) {
			dir := t.TempDir()
			o := Options{Library: openLib(t, dir), Domain: domain.OS, Trajectories: trajs(80), Evaluator: &pleasedEval{}, Optimizer: &fakeOpt{script: script},
				Iterations: 4, Minibatch: 6, RandSeed: 1}
			real := &fakeReal{}
			if withReal {
				o.Real, o.RealName = real, "recorded"
			}
			rep, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			best, err := o.Library.Get(rep.Best)
			if err != nil {
				t.Fatal(err)
			}
			won := strings.Contains(best.Templates["os"], pleaser)
			if won == withReal {
				t.Fatalf("real check %v: best %s holds the judge-pleasing edit: %v", withReal, best.Name, won)
			}
			if !withReal {
				return
			}
			first := rep.Iterations[0]
			if first.Accepted || !strings.Contains(first.Rejected, "real divergence 50.00 exceeds the seed's 10.00") {
				t.Fatalf("the pleasing edit: %+v", first)
			}
			if rep.SeedReal.Divergence != 10 || rep.BestReal == nil || rep.BestReal.Divergence >= 10 || !strings.Contains(best.Templates["os"], goodA) {
				t.Fatalf("seed real %+v, best %s real %+v", rep.SeedReal, best.Name, rep.BestReal)
			}
			var b bytes.Buffer
			rep.WriteText(&b)
			if !strings.Contains(b.String(), "real divergence on recorded") || !strings.Contains(b.String(), "rejected: real divergence") {
				t.Fatalf("report:\n%s", b.String())
			}
		})
	}
}
