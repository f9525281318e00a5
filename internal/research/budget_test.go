package research

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// countingModel is a fake endpoint counting the requests that reach it.
// The world model answers "right" when the system prompt holds the
// instruction the turn needs (as fakeEval decides); the judge says
// "right" for a right answer; the optimizer adds its script's next line
// under "# How to answer". onCall, when set, runs first with the call's
// number (1-based).
type countingModel struct {
	role    string
	script  []string
	noUsage bool
	onCall  func(n int64)
	n       atomic.Int64
}

var currentTemplate = regexp.MustCompile(`(?s)<current_template>\n(.*)</current_template>`)

func (m *countingModel) Complete(ctx context.Context, r worldmodel.Request) (*worldmodel.Response, error) {
	if err := ctx.Err(); err != nil { // a killed run sends nothing
		return nil, err
	}
	n := m.n.Add(1)
	if m.onCall != nil {
		m.onCall(n)
	}
	last := r.Messages[len(r.Messages)-1].Content
	var out string
	switch m.role {
	case "model":
		need := goodA
		if h(last)%2 == 1 {
			need = goodB
		}
		out = "wrong"
		if strings.Contains(r.Messages[0].Content, need) || h("base"+last)%4 == 0 {
			out = "right"
		}
	case "judge":
		out = last
	case "optimizer":
		tm := currentTemplate.FindStringSubmatch(last)
		line := m.script[int(n-1)%len(m.script)]
		out = "<rationale>add: " + line + "</rationale>\n<template>\n" + strings.Replace(tm[1], "# How to answer\n", "# How to answer\n"+line+"\n", 1) + "</template>"
	}
	resp := &worldmodel.Response{Content: out, FinishReason: "stop"}
	if !m.noUsage {
		resp.PromptTokens, resp.CompletionTokens = 100, 10
	}
	return resp, nil
}

// callingEval scores turns by calling a world model and a judge, four at
// a time, and caches each turn's score as the bench pipeline does, so a
// cached turn calls nobody.
type callingEval struct {
	model, judge worldmodel.Completer
	mu           sync.Mutex
	cache        map[string]float64
}

func (e *callingEval) Evaluate(ctx context.Context, v *promptlib.Version, d domain.Domain, ts []*trajectory.Trajectory) (*Evaluation, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	scores := make([][]float64, len(ts))
	for i, t := range ts {
		sys, err := v.Render(d, *t.Components)
		if err != nil {
			return nil, err
		}
		scores[i] = make([]float64, len(t.Turns))
		for k, tu := range t.Turns {
			g.Go(func() error {
				key := v.ID + "/" + t.ID + "/" + tu.Action
				e.mu.Lock()
				s, ok := e.cache[key]
				e.mu.Unlock()
				if !ok {
					p, err := e.model.Complete(gctx, worldmodel.Request{Messages: []worldmodel.Message{{Role: "system", Content: sys}, {Role: "user", Content: t.ID + "/" + tu.Action}}})
					if err != nil {
						return err
					}
					j, err := e.judge.Complete(gctx, worldmodel.Request{Messages: []worldmodel.Message{{Role: "user", Content: p.Content}}})
					if err != nil {
						return err
					}
					s = 20
					if j.Content == "right" {
						s = 100
					}
					e.mu.Lock()
					e.cache[key] = s
					e.mu.Unlock()
				}
				scores[i][k] = s
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	ev := &Evaluation{PerTrajectory: map[string]float64{}}
	for i, t := range ts {
		sum := 0.0
		for k, s := range scores[i] {
			sum += s
			ev.Samples = append(ev.Samples, Sample{Trajectory: t.ID, Turn: k + 1, Score: s})
		}
		ev.PerTrajectory[t.ID] = sum / float64(len(t.Turns))
	}
	return ev, nil
}

// metered are the three fake endpoints of a budgeted run, the cache the
// evaluator keeps across runs (as bench keeps its cache on disk).
type meteredFakes struct {
	model, judge, opt *countingModel
	cache             map[string]float64
	optCache          *memoStore
}

// memo answers a request it has seen from memory, as the CLI's response
// cache does for the optimizer, outside the budget's meter.
type memoStore struct {
	mu sync.Mutex
	m  map[string]*worldmodel.Response
}

// Key, Get and Put make a memoStore the optimizer's AnswerCache.
func (m *memoStore) Key(r worldmodel.Request, _ string) string { return r.Hash("") }

func (m *memoStore) Get(k string) (*worldmodel.Response, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.m[k]
	return r, ok
}

func (m *memoStore) Put(k string, r *worldmodel.Response) {
	m.mu.Lock()
	m.m[k] = r
	m.mu.Unlock()
}

func newMeteredFakes(script []string) *meteredFakes {
	return &meteredFakes{model: &countingModel{role: "model"}, judge: &countingModel{role: "judge"}, opt: &countingModel{role: "optimizer", script: script}, cache: map[string]float64{}, optCache: &memoStore{m: map[string]*worldmodel.Response{}}}
}

func (f *meteredFakes) calls() int64 { return f.model.n.Load() + f.judge.n.Load() + f.opt.n.Load() }

func (f *meteredFakes) options(b *Budget, lib *promptlib.Library, journal io.Writer, resume *Journal) Options {
	return Options{Library: lib, Domain: domain.OS, Trajectories: trajs(24), Iterations: 6, Minibatch: 3, RandSeed: 1,
		Evaluator: &callingEval{model: b.Meter("model", f.model), judge: b.Meter("judge", f.judge), cache: f.cache},
		Optimizer: NewModelOptimizer(b.Meter("optimizer", f.opt), "opt", &OptimizerOptions{Cache: f.optCache}),
		Budget:    b, Journal: journal, Resume: resume}
}

var budgetScript = []string{goodA, noise[0], goodB, noise[1]}

func openLib(t *testing.T, dir string) *promptlib.Library {
	t.Helper()
	lib, err := promptlib.Open(filepath.Join(dir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// TestBudgetStopsAtTheCap runs the search uncapped to learn its cost, then
// with a cap of about half: the fakes see exactly the cap, the journal and
// the report say the run ended on budget, and the test comparison, whose
// calls were held back, is still made.
func TestBudgetStopsAtTheCap(t *testing.T) {
	free := newMeteredFakes(budgetScript)
	fb := NewBudget(Limits{})
	fo := free.options(fb, openLib(t, t.TempDir()), nil, nil)
	est := EstimateCost(fo)
	if _, err := Run(context.Background(), fo); err != nil {
		t.Fatal(err)
	}
	if got := fb.Spent().Calls; int64(got) != free.calls() {
		t.Fatalf("the budget counted %d calls, the fakes saw %d", got, free.calls())
	}
	if int64(est.Calls) < free.calls() || est.TestCalls != 2*24*2 {
		t.Fatalf("estimate %+v, the run made %d calls", est, free.calls())
	}

	capped := int(free.calls() / 2)
	f := newMeteredFakes(budgetScript)
	b := NewBudget(Limits{Calls: capped})
	var journal bytes.Buffer
	o := f.options(b, openLib(t, t.TempDir()), &journal, nil)
	var progress bytes.Buffer
	o.Progress, o.ProgressCalls = &progress, 50
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	t.Log("\n" + text.String())
	if f.calls() != int64(capped) || rep.Spent.Calls != capped {
		t.Fatalf("cap %d: the fakes saw %d calls, the report says %d (uncapped: %d)", capped, f.calls(), rep.Spent.Calls, free.calls())
	}
	if rep.BudgetStop == "" || rep.NoTest != "" || rep.Best == rep.Seed || len(rep.Iterations) >= 6 {
		t.Fatalf("report: budget stop %q, no test %q, best %s, %d iterations", rep.BudgetStop, rep.NoTest, rep.BestName, len(rep.Iterations))
	}
	for _, want := range []string{"ended on budget after", "\ntest: seed ", fmt.Sprintf("spent: %d/%d calls", capped, capped)} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The spend line comes every 50 finished calls and counts the calls
	// started by then, which run ahead by those in flight.
	spentLine := regexp.MustCompile(fmt.Sprintf(`research: spent (1[0-9][0-9])/%d calls`, capped))
	if !strings.Contains(progress.String(), "research: ended on budget before iteration") || !spentLine.MatchString(progress.String()) {
		t.Errorf("progress:\n%s", progress.String())
	}
	j, err := ReadJournal(&journal)
	if err != nil {
		t.Fatal(err)
	}
	if j.Stop == nil || j.Stop.Iteration != len(rep.Iterations) || j.Spent.Calls != capped || j.Header == nil {
		t.Fatalf("journal: stop %+v, spent %+v", j.Stop, j.Spent)
	}
}

// killWriter drops every write once killed, as a journal file stops
// growing when its process dies.
type killWriter struct {
	w      *bytes.Buffer
	mu     sync.Mutex
	killed bool
}

func (k *killWriter) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.killed {
		return len(p), nil
	}
	return k.w.Write(p)
}

// TestBudgetSurvivesKill kills a capped run in the middle of a call (its
// journal stops growing, its context ends), resumes it from the journal
// with the same cap, and checks that the two runs together call the fakes
// no more than the cap, the call in flight at the kill included.
func TestBudgetSurvivesKill(t *testing.T) {
	const capped = 250
	dir := t.TempDir()
	f := newMeteredFakes(budgetScript)
	var buf bytes.Buffer
	kw := &killWriter{w: &buf}
	ctx, kill := context.WithCancel(context.Background())
	defer kill()
	f.model.onCall = func(n int64) {
		if n == 70 {
			kw.mu.Lock()
			kw.killed = true
			kw.mu.Unlock()
			kill()
		}
	}
	b := NewBudget(Limits{Calls: capped})
	o := f.options(b, openLib(t, dir), nil, nil)
	o.Journal = kw
	if _, err := Run(ctx, o); !errors.Is(err, context.Canceled) {
		t.Fatalf("killed run: %v", err)
	}
	f.model.onCall = nil
	before := f.calls()
	j, err := ReadJournal(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	// A call journaled but killed before its request left counts too: the
	// journal may count up to the four calls in flight more than reached
	// the fakes, never fewer.
	if n := int64(j.Spent.Calls); n < before || n > before+4 {
		t.Fatalf("the journal counts %d calls, the fakes saw %d", j.Spent.Calls, before)
	}
	if j.Spent.Estimated == 0 {
		t.Fatalf("the call in flight at the kill was not charged: %+v", j.Spent)
	}

	b2 := NewBudget(Limits{Calls: capped})
	var rest bytes.Buffer
	rep, err := Run(context.Background(), f.options(b2, openLib(t, dir), &rest, j))
	if err != nil {
		t.Fatal(err)
	}
	if f.calls() > capped || f.calls() < capped-4 || rep.Spent.Calls != capped || rep.BudgetStop == "" {
		t.Fatalf("killed and resumed runs called the fakes %d times (%d before the kill), report %d, cap %d; stop %q", f.calls(), before, rep.Spent.Calls, capped, rep.BudgetStop)
	}

	after := f.calls()
	// A third run on the whole journal spends nothing more: everything it
	// needs is journaled or cached, and the cap is reached.
	all, err := ReadJournal(bytes.NewReader(append(buf.Bytes(), rest.Bytes()...)))
	if err != nil {
		t.Fatal(err)
	}
	again, err := Run(context.Background(), f.options(NewBudget(Limits{Calls: capped}), openLib(t, dir), &bytes.Buffer{}, all))
	if err != nil {
		t.Fatal(err)
	}
	if f.calls() != after || again.Spent.Calls != capped || again.Best != rep.Best || again.Verdict() != rep.Verdict() {
		t.Fatalf("the third run called %d more times and chose %s (%s), the second %s", f.calls()-after, again.BestName, again.Verdict(), rep.BestName)
	}
}

// TestBudgetTokens caps tokens: the run stays under the cap, and tokens an
// endpoint did not report are estimated and labelled as such.
func TestBudgetTokens(t *testing.T) {
	for _, noUsage := range []bool{false, true} {
		t.Run(fmt.Sprintf("noUsage=%v", noUsage), func(t *testing.T) {
			const capTokens = 20000
			f := newMeteredFakes(budgetScript)
			f.model.noUsage, f.judge.noUsage = noUsage, noUsage
			b := NewBudget(Limits{Tokens: capTokens, Completion: 20})
			rep, err := Run(context.Background(), f.options(b, openLib(t, t.TempDir()), nil, nil))
			if err != nil {
				t.Fatal(err)
			}
			s := rep.Spent
			if s.Tokens > capTokens || rep.BudgetStop == "" || !strings.Contains(rep.BudgetStop, "tokens") {
				t.Fatalf("spent %+v of %d tokens; stop %q", s, capTokens, rep.BudgetStop)
			}
			if noUsage != (s.Estimated > 0) || (!noUsage && s.Roles["optimizer"].Tokens != int64(110*s.Roles["optimizer"].Calls)) {
				t.Fatalf("estimated %d tokens of %d with noUsage=%v; roles %+v", s.Estimated, s.Tokens, noUsage, s.Roles)
			}
			if int64(s.Calls) != f.calls() {
				t.Fatalf("budget counted %d calls, fakes saw %d", s.Calls, f.calls())
			}
			if noUsage && !strings.Contains(s.String(rep.Limits), "estimated)") {
				t.Fatalf("estimate not labelled: %s", s.String(rep.Limits))
			}
		})
	}
}

// TestBudgetTooSmallForTest: a cap that cannot hold the test split's calls
// lets the search use it all, and the report says the test could not be
// afforded instead of comparing.
func TestBudgetTooSmallForTest(t *testing.T) {
	f := newMeteredFakes(budgetScript)
	b := NewBudget(Limits{Calls: 40})
	rep, err := Run(context.Background(), f.options(b, openLib(t, t.TempDir()), nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if f.calls() != 40 || rep.BudgetStop == "" || rep.NoTest == "" || rep.Improve {
		t.Fatalf("calls %d, stop %q, no test %q", f.calls(), rep.BudgetStop, rep.NoTest)
	}
	if v := rep.Verdict(); !strings.HasPrefix(v, "no significant improvement") && !strings.HasPrefix(v, "no test comparison") {
		t.Fatalf("verdict %q", v)
	}
}

func TestJournalRejectsGarbage(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"done before call", `{"done":{"id":0,"tokens":3}}` + "\n{}\n", "never started"},
		{"unknown line", "{}\n{}\n", "not a header"},
		{"late header", `{"iteration":0}` + "\n" + `{"header":{"domain":"os"}}` + "\n{}\n", "header after"},
	} {
		if _, err := ReadJournal(strings.NewReader(c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestResumeRefusesOtherSettings(t *testing.T) {
	dir := t.TempDir()
	jpath := filepath.Join(dir, "journal.jsonl")
	run(t, dir, noise, 1, nil, &fakeEval{})
	b, _ := os.ReadFile(jpath)
	j, err := ReadJournal(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Library: openLib(t, dir), Domain: domain.OS, Trajectories: trajs(80), Evaluator: &fakeEval{}, Optimizer: &fakeOpt{script: noise},
		Iterations: 2, Minibatch: 6, RandSeed: 2, Resume: j})
	if err == nil || !strings.Contains(err.Error(), "seed") {
		t.Fatalf("resumed with another seed: %v", err)
	}
}

// sizedModel is an endpoint that answers every call with all the
// completion tokens it allows (maxTokens when the call sets none), after
// a pause that lets concurrent calls overlap; it records the requests.
type sizedModel struct {
	maxTokens int
	mu        sync.Mutex
	reqs      []worldmodel.Request
}

func (m *sizedModel) Complete(ctx context.Context, r worldmodel.Request) (*worldmodel.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, r)
	m.mu.Unlock()
	time.Sleep(time.Millisecond)
	n := r.MaxTokens
	if n <= 0 {
		n = m.maxTokens
	}
	return &worldmodel.Response{Content: "x", FinishReason: "length", PromptTokens: 5, CompletionTokens: n}, nil
}

// sizedRequest is a call of about 5 prompt tokens, as sizedModel counts it.
func sizedRequest(maxTokens int) worldmodel.Request {
	return worldmodel.Request{Messages: []worldmodel.Message{{Role: "user", Content: "x"}}, MaxTokens: maxTokens}
}

// TestBudgetTokensHold: the token cap holds against a completion as large
// as its max_tokens, one at a time and with calls in flight together.
func TestBudgetTokensHold(t *testing.T) {
	t.Run("large completion near the cap", func(t *testing.T) {
		b := NewBudget(Limits{Tokens: 1000})
		m := &sizedModel{}
		c := b.Meter("model", m)
		for range 60 { // 60 calls of 15 tokens: 900 spent
			if _, err := c.Complete(context.Background(), sizedRequest(10)); err != nil {
				t.Fatal(err)
			}
		}
		_, err := c.Complete(context.Background(), sizedRequest(2000))
		if s := b.Spent(); !errors.Is(err, ErrBudget) || s.Tokens > 1000 || len(m.reqs) != 60 {
			t.Fatalf("a call that may complete 2000 tokens with 100 left: err %v, spent %d of 1000, %d calls sent", err, s.Tokens, len(m.reqs))
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		const capTokens = 2000 // 19 calls of 105 tokens
		b := NewBudget(Limits{Tokens: capTokens})
		m := &sizedModel{}
		c := b.Meter("model", m)
		var g errgroup.Group
		for range 8 {
			g.Go(func() error {
				for {
					if _, err := c.Complete(context.Background(), sizedRequest(100)); err != nil {
						if errors.Is(err, ErrBudget) {
							return nil
						}
						return err
					}
				}
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		// Calls waiting for room let the run use all of it that whole
		// calls can: neither over the cap nor stopped early.
		if s := b.Spent(); s.Tokens > capTokens || s.Calls != 19 || len(m.reqs) != 19 {
			t.Fatalf("spent %d of %d tokens in %d calls (%d sent), want 19 calls", s.Tokens, capTokens, s.Calls, len(m.reqs))
		}
	})
	t.Run("call without max_tokens", func(t *testing.T) {
		for _, c := range []struct {
			limits   Limits
			want     int
			maxField bool
		}{
			{Limits{Tokens: 1000, Completion: 50}, 50, true},
			{Limits{Tokens: 1 << 20}, DefaultCompletion, true},
			{Limits{Calls: 10}, 0, false}, // no token cap: sent as it came
		} {
			m := &sizedModel{maxTokens: 80}
			if _, err := NewBudget(c.limits).Meter("judge", m).Complete(context.Background(), sizedRequest(0)); err != nil {
				t.Fatal(err)
			}
			if r := m.reqs[0]; r.MaxTokens != c.want || r.MaxCompletionTokens != c.maxField {
				t.Errorf("%+v: sent max tokens %d (max_completion_tokens %v), want %d (%v)", c.limits, r.MaxTokens, r.MaxCompletionTokens, c.want, c.maxField)
			}
		}
		// The default cap does not fit in a small budget: refused unsent.
		m := &sizedModel{maxTokens: 80}
		_, err := NewBudget(Limits{Tokens: 1000}).Meter("judge", m).Complete(context.Background(), sizedRequest(0))
		if !errors.Is(err, ErrBudget) || len(m.reqs) != 0 || !strings.Contains(err.Error(), "32768 completion at most") {
			t.Fatalf("err %v, %d sent", err, len(m.reqs))
		}
	})
}
