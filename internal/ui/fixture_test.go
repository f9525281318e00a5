package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/labels"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/research"
	"github.com/agentworld/agentworld/internal/rollout"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/ui"
)

// fixture is a data dir, two judged runs of it (model-a judged well,
// model-b worse, with planted errors), a session database with a fork
// and a label database.
type fixture struct {
	root, data, runs, labelsPath, dbPath string
	rollouts, research                   string
	samples                              []string // sample keys, in file order
}

var fixtureDomains = []string{"terminal", "mcp", "web"}

func writeFile(t testing.TB, path string, lines []any) {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		j, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(j, '\n'))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{root: root, data: filepath.Join(root, "data"), runs: filepath.Join(root, "runs"), labelsPath: filepath.Join(root, "labels.db"), dbPath: filepath.Join(root, "sessions.db"),
		rollouts: filepath.Join(root, "rollouts"), research: filepath.Join(root, "research")}
	type rec struct {
		Task          string   `json:"task"`
		ID            int      `json:"id"`
		Prompt        []string `json:"prompt"`
		Response      []string `json:"response"`
		CurrentPrompt string   `json:"current_prompt"`
		SystemStr     string   `json:"system_str"`
		TurnIdx       int      `json:"turn_idx"`
		TotalTurns    int      `json:"total_turns"`
	}
	type meta struct {
		Data string `json:"data"`
	}
	var recs map[string][]any = map[string][]any{}
	var ra, rb []any
	for di, d := range fixtureDomains {
		file := d + "_test.jsonl"
		for i := range 8 {
			truth := fmt.Sprintf("**Environment Observation:**\n$ ls\nreport-%d.txt\nnotes.md\n$", i)
			r := rec{Task: d, ID: di*100 + i, TurnIdx: 2, TotalTurns: 2, SystemStr: "You simulate a terminal.",
				Prompt:   []string{"### Turn 1\n**Action:**\ncd /work", fmt.Sprintf("### Turn 2\n**Action:**\nls (sample %d)", i)},
				Response: []string{"**Environment Observation:**\n$ cd /work\n$", truth}}
			recs[file] = append(recs[file], r)
			key := fmt.Sprintf("%s-%d", d, i)
			f.samples = append(f.samples, key)
			base := bench.Prediction{Sample: key, File: file, Line: i + 1, Task: d, Domain: d, ID: fmt.Sprint(r.ID), TurnIdx: 2}
			pa := base
			pa.Model, pa.Prediction = "model-a", strings.TrimPrefix(truth, "**Environment Observation:**\n")
			la := 5 - i%2
			ra = append(ra, bench.Judged{Prediction: pa, Judge: "judge-x", Scores: &score.Scores{Format: 5, Factuality: la, Consistency: la, Realism: 5, Quality: la},
				Strengths: []string{"lists the files"}, JudgeOutput: "The listing matches.\n<final_evaluation>```json\n{\"scores\":{}}\n```</final_evaluation>"})
			pb := base
			pb.Model = "model-b"
			jb := bench.Judged{Judge: "judge-x"}
			switch i % 4 {
			case 0:
				pb.Prediction = "Sure! Here is the predicted observation:\n$ ls\nreport.txt\n$"
				jb.Scores = &score.Scores{Format: 3, Factuality: 2, Consistency: 3, Realism: 2, Quality: 2}
				jb.Weaknesses = []string{"breaks character with a preamble", "invents report.txt"}
			case 1:
				pb.Prediction = fmt.Sprintf("$ ls\nreport-%d.txt\n$", i)
				jb.Scores = &score.Scores{Format: 4, Factuality: 3, Consistency: 4, Realism: 4, Quality: 3}
				jb.Weaknesses = []string{"drops notes.md: the working tree drifted"}
			case 2:
				pb.Prediction = "$ ls\nrep"
				pb.Truncated, pb.FinishReason = true, "length"
				jb.Scores = &score.Scores{Format: 2, Factuality: 2, Consistency: 3, Realism: 2, Quality: 1}
			case 3:
				pb.Failure = bench.FailJudgeUnparsable
				pb.Prediction = "$ ls"
			}
			jb.Prediction = pb
			rb = append(rb, jb)
		}
	}
	for file, rs := range recs {
		writeFile(t, filepath.Join(f.data, file), rs)
	}
	for name, rows := range map[string][]any{"run-a": ra, "run-b": rb} {
		dir := filepath.Join(f.runs, name)
		writeFile(t, filepath.Join(dir, bench.JudgedFile), rows)
		writeFile(t, filepath.Join(dir, bench.RunFile), []any{meta{Data: f.data}})
	}
	// Sessions: a root with 120 turns and a fork of it.
	db, err := store.Open(f.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mk := func(id, parent string, n int, status string) {
		var turns []sim.TurnRecord
		for i := 1; i <= n; i++ {
			turns = append(turns, sim.TurnRecord{Turn: i, HistoryTurn: sim.HistoryTurn{Action: fmt.Sprintf("echo %d", i), Observation: fmt.Sprintf("out %d", i)},
				Result: sim.StepResult{Observation: fmt.Sprintf("out %d", i), Reward: float64(i % 2), Info: sim.StepInfo{Turn: i, LatencyMS: int64(10 + i), Backend: "model", RewardComponents: map[string]float64{"success": float64(i % 2)}}}})
		}
		at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
		rec := sim.SessionRecord{ID: id, Parent: parent, Root: "sess-root", World: "shell", Domain: "terminal", Backend: "model", Model: "wm-1", Spec: json.RawMessage(`{}`),
			InitialObservation: "$", Status: status, CreatedAt: at, UpdatedAt: at.Add(time.Duration(n) * time.Second)}
		if err := db.CreateSession(ctx, rec, turns); err != nil {
			t.Fatal(err)
		}
	}
	mk("sess-root", "", 120, sim.StatusActive)
	mk("sess-fork", "sess-root", 3, "closed")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// A rollout run: two groups of two episodes.
	rdir := filepath.Join(f.rollouts, "ro-1")
	sum := rollout.Summary{Episodes: 4, K: 2, RewardMean: 0.5, PassAt1: 0.5, PassAtK: 1, Groups: []rollout.GroupSummary{
		{GroupID: "g0", TaskID: "fix-bug", N: 2, Passed: 1, RewardMean: 0.5, RewardStd: 0.5, RewardMin: 0, RewardMax: 1, PassAt1: 0.5, PassAtK: 1},
		{GroupID: "g1", TaskID: "add-test", N: 2, Passed: 1, RewardMean: 0.5, RewardStd: 0.5, RewardMin: 0, RewardMax: 1, PassAt1: 0.5, PassAtK: 1}}}
	writeFile(t, filepath.Join(rdir, rollout.SummaryFile), []any{sum})
	var eps []any
	for g := range 2 {
		for i := range 2 {
			eps = append(eps, rollout.Row{GroupID: fmt.Sprintf("g%d", g), SampleIdx: i, TaskID: "fix-bug", Reward: float64(i), RewardComponents: map[string]float64{"success": float64(i)},
				StopReason: "terminated", NumTurns: 3 + i, EnvSessionID: "sess-root", LWMModel: "wm-1"})
		}
	}
	writeFile(t, filepath.Join(rdir, rollout.EpisodesFile), eps)
	// A research run: one accepted iteration whose template differs from v0.
	rsdir := filepath.Join(f.research, "rs-1")
	lib, err := promptlib.Open(filepath.Join(rsdir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	v0 := lib.List()[0]
	tm := map[string]string{}
	for k, v := range v0.Templates {
		tm[k] = v
	}
	tm["terminal"] = strings.Replace(tm["terminal"], "{{", "Keep every file listing exact.\n{{", 1)
	v1, err := lib.Add(&promptlib.Version{Parent: v0.ID, Rationale: "listings drift", Templates: tm})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(rsdir, "journal.jsonl"), []any{research.Iteration{N: 0, Parent: v0.Name, Candidate: v1.Name, Name: v1.Name, Rationale: "listings drift",
		ParentMinibatch: 41.5, CandidateMinibatch: 47.25, Accepted: true, ValMean: 46}})
	return f
}

// server starts the UI over the fixture, labelling on, over a real
// listener.
func (f *fixture) server(t testing.TB) (*httptest.Server, *labels.DB) {
	t.Helper()
	l, err := labels.Open(f.labelsPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	db, err := store.OpenReadOnly(f.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := ui.New(&ui.Options{Runs: bench.NewViewSource([]string{f.runs}, &bench.ViewOptions{Resamples: 100}), Sessions: db, Labels: l, PageSize: 10,
		Rollouts: []string{f.rollouts}, Research: []string{f.research}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, l
}
