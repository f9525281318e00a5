package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/research"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel/fakellm"
)

// The instructions the fake world model needs: with the first it answers
// even turns right, with the second odd ones.
const (
	researchGoodA = "Echo the word after say exactly."
	researchGoodB = "Never add a trailing period."
)

var sayWord = regexp.MustCompile(`say (w[0-9]+x([0-9]+))`)

// researchFakes start a world model that answers right only when its
// system prompt holds the instruction the turn needs, and an optimizer that
// cycles through script, adding each line under "# How to answer".
func researchFakes(t *testing.T, script []string) (wm, opt *fakellm.Server) {
	wm = fakellm.New(func(r *fakellm.Request) fakellm.Reply {
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
	})
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

func writeResearchData(t *testing.T, dir string) string {
	var b bytes.Buffer
	for i := range 40 {
		tr := trajectory.Trajectory{ID: fmt.Sprintf("r%02d", i), Domain: "os", Source: "test",
			Components: &trajectory.Components{TaskDescription: "Say words.", ActionSpace: "say WORD"}}
		for k := range 4 {
			w := fmt.Sprintf("w%dx%d", i, k)
			tr.Turns = append(tr.Turns, trajectory.Turn{Action: "say " + w, Observation: w})
		}
		line, err := json.Marshal(tr)
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
	if log := sub("log"); !strings.Contains(log, "3 v4 ") || !strings.Contains(log, "accepted, validation 100.00\n  add: "+researchGoodB) {
		t.Fatalf("research log:\n%s", log)
	}
	if d := sub("diff", "v2", "v4"); !strings.Contains(d, "+"+researchGoodB+"\n") {
		t.Fatalf("research diff:\n%s", d)
	}
	sub("promote", "v4")
	if v, err := (&templateFlags{dir: filepath.Join(out, "templates")}).version(); err != nil || v.Name != "v4" {
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

// TestResearchChild is the process TestResearchSurvivesKill9 kills.
func TestResearchChild(t *testing.T) {
	runChildCLI(t, "AGENTWORLD_RESEARCH_CHILD", "TestResearchSurvivesKill9")
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
	argv, _ := json.Marshal(researchArgs(data, out, wm.URL, opt.URL, iters))
	cmd := exec.Command(os.Args[0], "-test.run=^TestResearchChild$")
	cmd.Env = append(os.Environ(), "AGENTWORLD_RESEARCH_CHILD="+string(argv))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(out, "journal.jsonl")
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(journal)
		if bytes.Count(b, []byte("\n")) >= 3 {
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
	done, err := research.ReadJournal(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	optBefore, wmBefore := opt.Count(), wm.Count()

	if _, stderr, err := runBenchCLI(t, researchArgs(data, out, wm.URL, opt.URL, iters)...); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, stderr)
	}
	if got, want := opt.Count()-optBefore, iters-len(done); got != want {
		t.Errorf("the resumed run asked the optimizer %d times, want %d (%d iterations were journaled)", got, want, len(done))
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
