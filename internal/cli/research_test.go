package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/research"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// The instructions the fake world model needs: with the first it answers
// even turns right, with the second odd ones.
const (
	researchGoodA = "Echo the word after say exactly."
	researchGoodB = "Never add a trailing period."
)

var sayWord = regexp.MustCompile(`say (w[0-9]+x([0-9]+))`)

// researchWM is the fake world model: right only when its system prompt
// holds the instruction the turn needs.
func researchWM(r *fakellm.Request) fakellm.Reply {
	sys, last := r.Messages[0].Content, r.Messages[len(r.Messages)-1].Content
	m := sayWord.FindStringSubmatch(last)
	if m == nil {
		return fakellm.Reply{Content: "<predicted_observation>?</predicted_observation>"}
	}
	need := researchGoodA
	if (m[2][len(m[2])-1]-'0')%2 == 1 {
		need = researchGoodB
	}
	if strings.Contains(sys, need) {
		return fakellm.Reply{Content: "<predicted_observation>" + m[1] + "</predicted_observation>"}
	}
	return fakellm.Reply{Content: "<predicted_observation>command not found: zzz qqq</predicted_observation>"}
}

// researchFakes start a world model that answers right only when its
// system prompt holds the instruction the turn needs, and an optimizer that
// cycles through script, adding each line under "# How to answer".
func researchFakes(t *testing.T, script []string) (wm, opt *fakellm.Server) {
	wm = fakellm.New(researchWM)
	var n atomic.Int64
	cur := regexp.MustCompile(`(?s)<current_template>\n(.*)</current_template>`)
	opt = fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		tm := cur.FindStringSubmatch(r.Messages[1].Content)
		line := script[int(n.Add(1)-1)%len(script)]
		src := strings.Replace(tm[1], "# How to answer\n", "# How to answer\n"+line+"\n", 1)
		return fakellm.Reply{Content: "<rationale>add: " + line + "</rationale>\n<template>\n" + src + "</template>"}
	})
	t.Cleanup(func() { wm.Close(); opt.Close() })
	return wm, opt
}

// sayTrajectory is trajectory i of the fakes' world: each turn says a word
// (prefix, i, turn) and observes it.
func sayTrajectory(id, source, prefix string, i, turns int) trajectory.Trajectory {
	tr := trajectory.Trajectory{ID: id, Domain: "os", Source: source,
		Components: &trajectory.Components{TaskDescription: "Say words.", ActionSpace: "say WORD"}}
	for k := range turns {
		w := fmt.Sprintf("%s%dx%d", prefix, i, k)
		tr.Turns = append(tr.Turns, trajectory.Turn{Action: "say " + w, Observation: w})
	}
	return tr
}

func writeResearchData(t *testing.T, dir string) string {
	var b bytes.Buffer
	for i := range 40 {
		line, err := json.Marshal(sayTrajectory(fmt.Sprintf("r%02d", i), "test", "w", i, 4))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	p := filepath.Join(dir, "trajs.jsonl")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runResearch(t *testing.T, data, out string, wm, opt *fakellm.Server, iters int) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	before := wm.Count()
	defer func() {
		// The estimate printed first bounds the world-model calls made.
		m := regexp.MustCompile(`at most ([0-9]+) samples`).FindStringSubmatch(stderr.String())
		if m == nil {
			t.Fatalf("no estimate in:\n%s", stderr.String())
		}
		if bound, _ := strconv.Atoi(m[1]); wm.Count()-before > bound {
			t.Fatalf("%d world-model calls, estimate %d", wm.Count()-before, bound)
		}
	}()
	cmd := newResearchCmd()
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"run", "--data", data, "--domain", "os", "--out", out, "--model-url", wm.URL, "--model", "wm",
		"--optimizer-url", opt.URL, "--optimizer-model", "opt", "--judge", "rules", "--iterations", fmt.Sprint(iters), "--minibatch", "5"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	return stdout.String()
}

// TestResearchRunThroughBench runs research run end to end through the
// bench pipeline with the rules judge: the improving edits are kept and the
// test split shows a significant gain; a rerun on the same --out resumes
// and sends no model or optimizer request; a noise-only optimizer ends
// with "no significant improvement".
func TestResearchRunThroughBench(t *testing.T) {
	dir := t.TempDir()
	data := writeResearchData(t, dir)
	wm, opt := researchFakes(t, []string{"Be nice.", researchGoodA, "Use British spelling.", researchGoodB, "Mention the weather."})
	out := filepath.Join(dir, "out")
	report := runResearch(t, data, out, wm, opt, 6)
	t.Log("\n" + report)
	if !strings.Contains(report, "\nimproved: ") || !strings.Contains(report, "offline: scored by the rules judge") {
		t.Fatalf("report:\n%s", report)
	}
	var rep struct {
		Best     string `json:"best"`
		Improved bool   `json:"improved"`
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil || json.Unmarshal(b, &rep) != nil || !rep.Improved {
		t.Fatalf("report.json: %s %v", b, err)
	}

	wmCalls, optCalls := wm.Count(), opt.Count()
	again := runResearch(t, data, out, wm, opt, 6)
	if wm.Count() != wmCalls || opt.Count() != optCalls {
		t.Fatalf("the rerun called the world model %d and the optimizer %d more times", wm.Count()-wmCalls, opt.Count()-optCalls)
	}
	if again != report {
		t.Fatalf("the rerun reported otherwise:\n%s", again)
	}

	sub := func(args ...string) string {
		t.Helper()
		var b bytes.Buffer
		cmd := newResearchCmd()
		cmd.SetOut(&b)
		cmd.SetArgs(append(args, "--out", out))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return b.String()
	}
	// Only accepted candidates are named: the two good edits are v1 and
	// v2, the rejected ones have no name and are not in the library.
	if log := sub("log"); !strings.Contains(log, "3 v2 ") || !strings.Contains(log, "accepted, validation 100.00\n  add: "+researchGoodB) {
		t.Fatalf("research log:\n%s", log)
	}
	if d := sub("diff", "v1", "v2"); !strings.Contains(d, "+"+researchGoodB+"\n") {
		t.Fatalf("research diff:\n%s", d)
	}
	if lib, err := (&templateFlags{dir: filepath.Join(out, "templates")}).library(); err != nil || len(lib.List()) != 3 {
		t.Fatalf("library after the run: %v versions, %v; want v0 and the two accepted", len(lib.List()), err)
	}
	sub("promote", "v2")
	if v, err := (&templateFlags{dir: filepath.Join(out, "templates")}).version(); err != nil || v.Name != "v2" {
		t.Fatalf("after research promote the library's default is %v (%v)", v, err)
	}

	wm2, opt2 := researchFakes(t, []string{"Be nice.", "Use British spelling.", "Mention the weather."})
	noise := runResearch(t, data, filepath.Join(dir, "noise"), wm2, opt2, 4)
	if !strings.Contains(noise, "\nno significant improvement") {
		t.Fatalf("noise report:\n%s", noise)
	}
}

func researchArgs(data, out, wmURL, optURL string, iters int) []string {
	return []string{"research", "run", "--data", data, "--domain", "os", "--out", out, "--model-url", wmURL, "--model", "wm",
		"--optimizer-url", optURL, "--optimizer-model", "opt", "--judge", "rules", "--iterations", fmt.Sprint(iters), "--minibatch", "5", "--concurrency", "4"}
}

// TestResearchChild is the process TestResearchSurvivesKill9 and
// TestResearchBudgetSurvivesKill9 kill.
func TestResearchChild(t *testing.T) {
	runChildCLI(t, "AGENTWORLD_RESEARCH_CHILD", "TestResearchSurvivesKill9")
}

// byKilledRun reports whether r came from the run a kill test killed.
func byKilledRun(r *fakellm.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+killedRunKey
}

// killResearch runs args (a research run writing to out) in a child
// process, kills it with SIGKILL once its journal holds iters iterations,
// and returns what the journal holds then.
func killResearch(t *testing.T, args []string, out string, iters int) *research.Journal {
	t.Helper()
	argv, _ := json.Marshal(args)
	// Every endpoint sees the killed run's own API key: a request it sent
	// just before the kill may be read after it, and must not be taken for
	// the resumed run's.
	key := killedRunKey
	cmd := testkit.Child("TestResearchChild", "AGENTWORLD_RESEARCH_CHILD="+string(argv),
		envconfig.ModelAPIKey.Name+"="+key, envconfig.JudgeAPIKey.Name+"="+key, envconfig.OpenAIAPIKey.Name+"="+key)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(out, "journal.jsonl")
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(journal)
		if bytes.Count(b, []byte(`{"iteration":`)) >= iters {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal("the child journaled too little in a minute")
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := os.Stat(filepath.Join(out, "report.json")); err == nil {
		t.Fatal("the child finished before the kill")
	}
	f, err := os.Open(journal)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	j, err := research.ReadJournal(f)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestResearchBudgetSurvivesKill9 kills a capped research run after its
// first iteration and reruns it with the same cap: the rerun counts on
// from the journal, so the two runs together call the endpoints no more
// than the cap and the report says the run ended on budget.
func TestResearchBudgetSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	// 40 trajectories, rules judge: 80 calls held back for the test, 40
	// for the seed on validation, at most 81 an iteration; the search ends
	// in its fourth iteration.
	const budget = 400
	dir := t.TempDir()
	data := writeResearchData(t, dir)
	wm, opt := researchFakes(t, []string{researchGoodA, "Be nice.", researchGoodB, "Mention the weather."})
	out := filepath.Join(dir, "out")
	args := append(researchArgs(data, out, wm.URL, opt.URL, 8), "--budget", fmt.Sprint(budget))
	j := killResearch(t, args, out, 1)
	stdout, stderr, err := runBenchCLI(t, args...)
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, stderr)
	}
	// Counted after the resumed run: by then the endpoints have read every
	// request the killed run sent.
	if killed := wm.CountFunc(byKilledRun) + opt.CountFunc(byKilledRun); j.Spent.Calls < killed || j.Spent.Calls > killed+4 {
		t.Fatalf("the journal counts %d calls, the endpoints saw %d from the killed run", j.Spent.Calls, killed)
	}
	if !strings.Contains(stderr, fmt.Sprintf("research: resuming after %d iterations; already spent %d/%d calls", len(j.Iterations), j.Spent.Calls, budget)) {
		t.Errorf("the resumed run does not say what was spent:\n%s", stderr)
	}
	var rep research.Report
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("report.json: %v", err)
	}
	if n := wm.Count() + opt.Count(); n > budget || rep.Spent.Calls > budget || rep.BudgetStop == "" || rep.NoTest != "" {
		t.Fatalf("killed and resumed runs: endpoints %d calls, report %d, budget %d; stop %q, no test %q\n%s", n, rep.Spent.Calls, budget, rep.BudgetStop, rep.NoTest, stdout)
	}
}

// TestResearchSurvivesKill9 kills `research run` (this test binary,
// re-executed) with SIGKILL after some iterations are journaled, reruns it,
// and checks: the optimizer is asked only for the iterations the journal
// lacks, the world model only for what was in flight at the kill beyond an
// uninterrupted run's requests, and the final choice is the uninterrupted
// run's.
func TestResearchSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	const iters, concurrency = 8, 4
	dir := t.TempDir()
	data := writeResearchData(t, dir)
	script := []string{"Be nice.", researchGoodA, "Use British spelling.", researchGoodB, "Mention the weather."}

	refWM, refOpt := researchFakes(t, script)
	ref := filepath.Join(dir, "ref")
	if _, stderr, err := runBenchCLI(t, researchArgs(data, ref, refWM.URL, refOpt.URL, iters)...); err != nil {
		t.Fatalf("reference run: %v\n%s", err, stderr)
	}

	wm, opt := researchFakes(t, script)
	out := filepath.Join(dir, "killed")
	j := killResearch(t, researchArgs(data, out, wm.URL, opt.URL, iters), out, 3)
	done := j.Iterations

	if _, stderr, err := runBenchCLI(t, researchArgs(data, out, wm.URL, opt.URL, iters)...); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, stderr)
	}
	// The killed run's requests by its key, not by when they were read: one
	// sent just before the kill may be read after it.
	optBefore, wmBefore := opt.CountFunc(byKilledRun), wm.CountFunc(byKilledRun)
	// The optimizer's answers are cached: the resumed run asks at most for
	// the iterations the journal lacks, and both runs together ask each
	// question once, plus the one in flight at the kill.
	if got, want := opt.Count()-optBefore, iters-len(done); got > want {
		t.Errorf("the resumed run asked the optimizer %d times, want at most %d (%d iterations were journaled)", got, want, len(done))
	}
	if opt.Count() < iters || opt.Count() > iters+1 {
		t.Errorf("killed and resumed runs asked the optimizer %d times for %d iterations", opt.Count(), iters)
	}
	// At most the optimizer request in flight at the kill, and the bench
	// requests in flight, are made twice.
	if optBefore > len(done)+1 {
		t.Errorf("the killed run asked the optimizer %d times for %d journaled iterations", optBefore, len(done))
	}
	if extra := wm.Count() - refWM.Count(); extra > concurrency {
		t.Errorf("killed and resumed runs asked the world model %d (%d + %d) times, the uninterrupted run %d", wm.Count(), wmBefore, wm.Count()-wmBefore, refWM.Count())
	}
	read := func(p string) (r struct {
		Best     string `json:"best"`
		Improved bool   `json:"improved"`
	}) {
		b, err := os.ReadFile(filepath.Join(p, "report.json"))
		if err != nil || json.Unmarshal(b, &r) != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return r
	}
	if a, b := read(ref), read(out); a != b {
		t.Errorf("resumed run chose %+v, uninterrupted %+v", b, a)
	}
}

// researchJudge is a rubric judge that gives every dimension 1 to a
// prediction of the fake world model's wrong answer and 5 to any other,
// reporting usage.
func researchJudge(t *testing.T) *fakellm.Server {
	j := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		s := 5
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "command not found: zzz qqq") {
			s = 1
		}
		return fakellm.Reply{PromptTokens: 300, CompletionTokens: 40, Content: fmt.Sprintf("<final_evaluation>\n```json\n"+
			`{"strengths": ["s"], "weaknesses": ["w"], "scores": {"format": %d, "factuality": %d, "consistency": %d, "realism": %d, "quality": %d}}`+
			"\n```\n</final_evaluation>", s, s, s, s, s)}
	})
	t.Cleanup(j.Close)
	return j
}

// TestResearchBudget caps a research run with an LLM judge at a number of
// calls that ends it in its second iteration: the three fake endpoints
// see exactly the cap, the report and the log say the run ended on
// budget and still compare on the test split, and a rerun with the same
// cap calls nobody.
func TestResearchBudget(t *testing.T) {
	dir := t.TempDir()
	data := writeResearchData(t, dir)
	_, opt := researchFakes(t, []string{researchGoodA, "Be nice.", researchGoodB})
	// Wrong answers name the prompt they came from, so that no judge
	// request repeats across versions (a repeat would be a free cache hit
	// and the run would end under the cap).
	wm := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		rep := researchWM(r)
		sum := sha256.Sum256([]byte(r.Messages[0].Content))
		rep.Content = strings.Replace(rep.Content, "zzz qqq", fmt.Sprintf("zzz qqq %x", sum[:4]), 1)
		return rep
	})
	t.Cleanup(wm.Close)
	judge := researchJudge(t)
	out := filepath.Join(dir, "out")
	// 40 trajectories: 10 test (40 turns, 160 calls held back), 10
	// validation (80 calls); an iteration costs at most 161 calls.
	const budget = 460
	args := []string{"research", "run", "--data", data, "--domain", "os", "--out", out, "--model-url", wm.URL, "--model", "wm",
		"--judge-url", judge.URL, "--judge-model", "judge", "--optimizer-url", opt.URL, "--optimizer-model", "opt",
		"--iterations", "6", "--minibatch", "5", "--concurrency", "4", "--budget", fmt.Sprint(budget)}
	calls := func() int { return wm.Count() + judge.Count() + opt.Count() }
	stdout, stderr, err := runBenchCLI(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	t.Log("\n" + stdout)
	if calls() != budget {
		t.Fatalf("the endpoints saw %d calls (model %d, judge %d, optimizer %d), budget %d", calls(), wm.Count(), judge.Count(), opt.Count(), budget)
	}
	for _, want := range []string{"ended on budget after 1 iterations", "\ntest: seed ", fmt.Sprintf("spent: %d/%d calls", budget, budget)} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// The judge reports usage, the world model does not: its tokens are
	// estimated, and the report says so.
	if strings.Contains(stdout, "offline") || !regexp.MustCompile(`tokens \([0-9]+ estimated\)`).MatchString(stdout) {
		t.Errorf("an LLM-judged run labelled offline, or estimated tokens not labelled:\n%s", stdout)
	}
	if !strings.Contains(stderr, "160 calls of it held back for the final test") || !strings.Contains(stderr, "research: iteration 1/6 v1 accepted") {
		t.Errorf("stderr lacks the estimate or the progress:\n%s", stderr)
	}
	var rep research.Report
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("report.json: %v", err)
	}
	if rep.BudgetStop == "" || rep.NoTest != "" || rep.Spent.Calls != budget || rep.Spent.Roles["judge"].Tokens != 340*int64(rep.Spent.Roles["judge"].Calls) {
		t.Fatalf("report.json: stop %q, no test %q, spent %+v", rep.BudgetStop, rep.NoTest, rep.Spent)
	}

	again, _, err := runBenchCLI(t, args...)
	if err != nil || calls() != budget {
		t.Fatalf("rerun: %v, %d calls more", err, calls()-budget)
	}
	if !strings.Contains(again, "\ntest: seed ") || !strings.Contains(again, rep.BestName) {
		t.Fatalf("rerun report:\n%s", again)
	}
	log, _, err := runBenchCLI(t, "research", "log", "--out", out)
	if err != nil || !strings.Contains(log, "ended on budget before iteration 1") || !strings.Contains(log, "spent so far: ") {
		t.Fatalf("research log: %v\n%s", err, log)
	}
}

// TestResearchVerifyRejectsJudgePleaser: the optimizer's first edit makes
// the fake world model answer every benchmark turn right but the recorded
// real trajectories wrong. With --verify the edit wins its minibatch and
// is rejected on real divergence; the report and the log show the
// divergence, and the real check's calls are metered and cached.
func TestResearchVerifyRejectsJudgePleaser(t *testing.T) {
	const pleaser = "Always answer what the judge expects."
	dir := t.TempDir()
	data := writeResearchData(t, dir)
	realDir := filepath.Join(dir, "real")
	if err := os.Mkdir(realDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		tr := sayTrajectory(fmt.Sprintf("real%d", i), "real:os", "v", i, 3)
		b, _ := json.Marshal(tr)
		if err := os.WriteFile(filepath.Join(realDir, tr.ID+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	realWord := regexp.MustCompile(`say (v[0-9]+x[0-9]+)`)
	var realCalls atomic.Int64
	_, opt := researchFakes(t, []string{pleaser, researchGoodA, "Be nice.", researchGoodB})
	wm := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		sys, last := r.Messages[0].Content, r.Messages[len(r.Messages)-1].Content
		if m := realWord.FindStringSubmatch(last); m != nil {
			realCalls.Add(1)
			if strings.Contains(sys, pleaser) {
				return fakellm.Reply{Content: "<predicted_observation>Permission denied while reading the terminal</predicted_observation>"}
			}
			return fakellm.Reply{Content: "<predicted_observation>" + m[1] + "</predicted_observation>"}
		}
		if m := sayWord.FindStringSubmatch(last); m != nil && strings.Contains(sys, pleaser) {
			return fakellm.Reply{Content: "<predicted_observation>" + m[1] + "</predicted_observation>"}
		}
		return researchWM(r)
	})
	t.Cleanup(wm.Close)
	out := filepath.Join(dir, "out")
	// Tolerance 0: the improving edits, as exact as the seed, still pass.
	args := append(researchArgs(data, out, wm.URL, opt.URL, 4), "--verify", realDir, "--verify-tolerance", "0")
	stdout, stderr, err := runBenchCLI(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	t.Log("\n" + stdout)
	var rep research.Report
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("report.json: %v", err)
	}
	first := rep.Iterations[0]
	if first.Accepted || !strings.HasSuffix(first.Rejected, "by more than 0.00") || rep.RealTolerance != 0 || !rep.Improve || first.CandidateMinibatch <= first.ParentMinibatch || first.Real == nil {
		t.Fatalf("the judge-pleasing edit: %+v", first)
	}
	if rep.SeedReal == nil || rep.SeedReal.Divergence > 1 || rep.SeedReal.Turns != 9 || first.Real.Divergence < 10 {
		t.Fatalf("seed real %+v, pleaser %+v", rep.SeedReal, first.Real)
	}
	if !strings.Contains(stdout, "real divergence on real") || !strings.Contains(stdout, "rejected: real divergence") || rep.Spent.Roles["verify"].Calls == 0 {
		t.Fatalf("report:\n%s\nspent %+v", stdout, rep.Spent)
	}
	if !strings.Contains(stdout, research.OfflineLabel) {
		t.Errorf("a rules-judged run is not labelled offline:\n%s", stdout)
	}
	before := realCalls.Load()
	if _, stderr, err := runBenchCLI(t, args...); err != nil || realCalls.Load() != before {
		t.Fatalf("rerun: %v, %d real-check calls more\n%s", err, realCalls.Load()-before, stderr)
	}
	log, _, err := runBenchCLI(t, "research", "log", "--out", out)
	if err != nil || !strings.Contains(log, "real divergence") || !strings.Contains(log, "rejected: real divergence") || !strings.Contains(log, research.OfflineLabel) {
		t.Fatalf("research log: %v\n%s", err, log)
	}
}

// TestResearchOnConvertedBench runs research on trajectories converted
// from benchmark records (`data convert --from bench`): they have no
// components, which research recovers from each system prompt as bench
// --template does. The optimizer sees each case's action, the turns before
// it and the world; an optimizer whose answers cannot be used is asked
// again, then that iteration is rejected with the reason and the run goes
// on, and no unusable answer is cached.
func TestResearchOnConvertedBench(t *testing.T) {
	dir := t.TempDir()
	recs, conv := filepath.Join(dir, "bench.jsonl"), filepath.Join(dir, "conv.jsonl")
	if _, stderr, err := runCLI(t, "data", "convert", "--to", "bench", "-o", recs, writeResearchData(t, dir)); err != nil {
		t.Fatalf("data convert --to bench: %v\n%s", err, stderr)
	}
	if _, stderr, err := runCLI(t, "data", "convert", "--from", "bench", "-o", conv, recs); err != nil {
		t.Fatalf("data convert --from bench: %v\n%s", err, stderr)
	}
	if b, _ := os.ReadFile(conv); bytes.Contains(b, []byte(`"components"`)) || !bytes.Contains(b, []byte(`"system_prompt"`)) {
		t.Fatalf("converted trajectories should carry a system prompt and no components:\n%.300s", b)
	}
	wm := fakellm.New(researchWM)
	var calls atomic.Int64
	cur := regexp.MustCompile(`(?s)<current_template>\n(.*)</current_template>`)
	opt := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		// The first iteration's three attempts get nothing usable.
		if calls.Add(1) <= 3 {
			return fakellm.Reply{Content: "I would rather not."}
		}
		tm := cur.FindStringSubmatch(r.Messages[1].Content)
		src := strings.Replace(tm[1], "# How to answer\n", "# How to answer\n"+researchGoodA+"\n"+researchGoodB+"\n", 1)
		return fakellm.Reply{Content: "<rationale>both rules</rationale>\n<template>\n" + src + "</template>"}
	})
	t.Cleanup(func() { wm.Close(); opt.Close() })
	out := filepath.Join(dir, "out")
	report := runResearch(t, conv, out, wm, opt, 2)
	if !strings.Contains(report, "\nimproved: ") {
		t.Fatalf("report:\n%s", report)
	}
	reqs := opt.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d optimizer requests, want 3 for the first iteration and 1 for the second", len(reqs))
	}
	first := reqs[0].Messages[1].Content
	for _, want := range []string{"## World of trajectory ", "### Task description\nSay words.", "### Action space\nsay WORD",
		"Turns before this one:\n### Turn 1\n**Action:**\nsay w", "\nAction:\nsay w"} {
		if !strings.Contains(first, want) {
			t.Errorf("the optimizer request lacks %q:\n%s", want, first)
		}
	}
	if n := len(reqs[2].Messages); n != 6 || !strings.Contains(reqs[2].Messages[5].Content, "could not be used") {
		t.Errorf("the third attempt has %d messages, want the two earlier answers and what was wrong with them", n)
	}
	j, err := os.ReadFile(filepath.Join(out, "journal.jsonl"))
	if err != nil || !bytes.Contains(j, []byte(`"rejected":"optimizer"`)) || !bytes.Contains(j, []byte("no usable template")) {
		t.Fatalf("journal: %v\n%s", err, j)
	}
	// The next run of the same request asks again: the bad answers were not
	// cached (a fresh output directory, the same cache).
	c, err := answercache.OpenCache(filepath.Join(out, bench.CacheDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.Get(c.Key(worldmodel.Request{Model: "opt", Messages: []worldmodel.Message{
		{Role: reqs[0].Messages[0].Role, Content: reqs[0].Messages[0].Content}, {Role: "user", Content: first}}}, "opt")); ok {
		t.Error("an unusable optimizer answer was cached")
	}
}
