package worldgen

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/itemf1"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/searchindex"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

func seeds(kinds ...string) []Seed {
	var out []Seed
	for i, k := range kinds {
		out = append(out, Seed{ID: "s" + k, Description: "KIND=" + k + " " + strings.Repeat("x", i%2)})
	}
	return out
}

func newOpts(t *testing.T, gen, wm *fakellm.Server) Options {
	return Options{
		Generator: worldmodel.New(gen.URL, "gen-fake", &worldmodel.Options{MaxRetries: -1}), GeneratorModel: "gen-fake",
		WorldModel: worldmodel.New(wm.URL, "wm-fake", &worldmodel.Options{MaxRetries: -1}),
		Seed:       3, Concurrency: 3, Shards: 4,
	}
}

// TestLadder: a fake generator emits good, broken, duplicated, trivially
// solved and flaky candidates; each bad one is rejected at the right rung
// with its reason, duplicates collapse, and the good ones enter the
// library with provenance.
func TestLadder(t *testing.T) {
	gen, wm := fakellm.New(fakeGenerator(0)), fakellm.New(fakeWorldModel(0))
	defer gen.Close()
	defer wm.Close()
	o := newOpts(t, gen, wm)
	o.Seeds = seeds("GOOD-1", "GOOD-2", "DUP", "BROKEN-JSON", "BAD-DOMAIN", "BAD-TOOL-SCHEMA", "BAD-ACTION", "NOOP-SOLVED", "INITIAL-SOLVED", "FLAKY", "HUGE", "LAX", "BAD-ARGS", "GOOD-0")
	o.Count = len(o.Seeds)
	dir := filepath.Join(t.TempDir(), "lib")
	st, err := Run(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // a world's rejection: rung and words of its reason
		"BROKEN-JSON":     "parse: malformed JSON",
		"BAD-DOMAIN":      "schema: world: invalid world spec: field domain",
		"BAD-TOOL-SCHEMA": "schema: action_space.tools[0] (t).input_schema",
		"BAD-ACTION":      "actions: no task survived",
		"NOOP-SOLVED":     "trivial-agents: no task survived (last: a no-op agent passed",
		"INITIAL-SOLVED":  "initial: no task survived (last: the initial state already meets the check",
		"FLAKY":           "reference: no task survived (last: the reference solution passed in 3 of 5",
		"HUGE":            "generate: generator answer over the response cap",
		"LAX":             "trivial-agents: no task survived (last: a random agent passed",
		"BAD-ARGS":        "reference: no task survived (last: the reference solution passed in 0 of 5",
	}
	got := map[string]string{}
	verdicts, _ := os.ReadFile(filepath.Join(dir, JournalDir, VerdictsFile))
	for i, s := range o.Seeds {
		kind := strings.TrimPrefix(s.ID, "s")
		for _, ln := range strings.Split(string(verdicts), "\n") {
			if strings.HasPrefix(ln, `{"i":`+itoa(i)+`,`) {
				got[kind] = ln
			}
		}
	}
	for kind, reason := range want {
		if !strings.Contains(got[kind], `"accepted":false`) || !strings.Contains(strings.ReplaceAll(got[kind], `","reason":"`, ": "), `"rung":"`+reason) {
			t.Errorf("%s: verdict %s, want rejected at %q", kind, got[kind], reason)
		}
	}
	// GOOD-0 and DUP are the same world: whichever came second collapsed
	dup := strings.Contains(got["DUP"], "near-duplicate of world") != strings.Contains(got["GOOD-0"], "near-duplicate of world")
	if !dup {
		t.Errorf("the duplicate pair did not collapse to one:\n%s\n%s", got["DUP"], got["GOOD-0"])
	}
	// each good world's second task repeats its first: dropped at dedup
	if !strings.Contains(got["GOOD-1"], `"accepted":true`) || !strings.Contains(got["GOOD-1"], "same instruction as") {
		t.Errorf("GOOD-1: %s", got["GOOD-1"])
	}
	if st.AcceptedWorlds != 3 || st.AcceptedTasks != 3 {
		t.Errorf("accepted %d worlds, %d tasks; want 3 and 3\n%+v", st.AcceptedWorlds, st.AcceptedTasks, st)
	}
	if st.Worlds[0].Survived != len(o.Seeds)-1 || st.Worlds[0].Rejected != 1 {
		t.Errorf("generate rung %+v", st.Worlds[0])
	}
	lib, err := library.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := lib.Count(library.Filter{Source: SourceSeed, Model: "gen-fake"})
	if err != nil || c.Worlds != 3 || c.Tasks != 3 {
		t.Errorf("library holds %+v, %v", c, err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestResumeAsksNothingTwice: a second run over the same library skips
// the decided candidates, and an answer journaled without a verdict (a
// kill between the two) is validated from the journal, not asked again.
func TestResumeAsksNothingTwice(t *testing.T) {
	gen, wm := fakellm.New(fakeGenerator(0)), fakellm.New(fakeWorldModel(0))
	defer gen.Close()
	defer wm.Close()
	o := newOpts(t, gen, wm)
	o.Seeds = seeds("GOOD-1", "GOOD-2", "GOOD-3", "GOOD-4")
	o.Count = 2
	dir := filepath.Join(t.TempDir(), "lib")
	if _, err := Run(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	if gen.Count() != 2 {
		t.Fatalf("%d generator requests, want 2", gen.Count())
	}
	// a kill after candidate 2's answer was journaled, before its verdict
	o.Count = 3
	od := o
	od.defaults() // the request as Run makes it
	p := od.plan(2)
	req := od.request(p)
	resp, err := o.Generator.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(filepath.Join(dir, JournalDir, AnswersFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(mustJSON(answerLine{I: 2, Request: req.Hash(o.GeneratorModel), Content: resp.Content}) + "\n")
	f.Close()
	gen.Reset()
	o.Count = 4
	st, err := Run(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if gen.Count() != 1 {
		t.Errorf("%d generator requests on resume, want 1 (candidate 3 only)", gen.Count())
	}
	if st.Candidates != 4 || st.AcceptedWorlds != 4 {
		t.Errorf("after resume: %+v", st)
	}
}

// TestFictionQuestionsAnswerable: every question of a generated fictional
// world is answerable from its documents: retrieval finds a supporting
// document, the answer items are in it, and the reference passes.
func TestFictionQuestionsAnswerable(t *testing.T) {
	gen, wm := fakellm.New(fakeGenerator(0)), fakellm.New(fakeWorldModel(0))
	defer gen.Close()
	defer wm.Close()
	o := newOpts(t, gen, wm)
	o.Domains = []string{"fiction"}
	o.Count = 3
	dir := filepath.Join(t.TempDir(), "lib")
	st, err := Run(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if st.AcceptedWorlds != 3 {
		t.Fatalf("%+v", st)
	}
	lib, _ := library.Open(dir)
	specs, err := lib.Specs()
	if err != nil {
		t.Fatal(err)
	}
	multi, n := 0, 0
	err = lib.Tasks(library.Filter{}, func(tk *library.TaskEntry, _ string) error {
		n++
		items := tk.Check.Answer.Items
		if len(items) > 1 {
			multi++
		}
		// retrieval with the question finds a document holding every item
		ix, err := searchindex.New(specs[tk.World].Facts.Documents)
		if err != nil {
			return err
		}
		defer ix.Close()
		hits, err := ix.Search(tk.Instruction, 10)
		if err != nil {
			return err
		}
		for _, it := range items {
			found := false
			for _, h := range hits {
				if d, _ := ix.Doc(h.Key); strings.Contains(d.Text, it) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: %q is in none of the top %d documents for %q", tk.ID, it, len(hits), tk.Instruction)
			}
		}
		// the reference's answer matches: item F1 1
		var answer string
		if err := json.Unmarshal(tk.Reference[len(tk.Reference)-1], &answer); err != nil {
			return err
		}
		if f1 := itemf1.ScoreAnswer(answer, items).F1; f1 != 1 {
			t.Errorf("%s: the reference answer %q scores F1 %v", tk.ID, answer, f1)
		}
		return nil
	})
	if err != nil || multi != 3 || n < 9 {
		t.Errorf("%d questions, %d multi-item (want one per world): %v", n, multi, err)
	}
	for _, r := range st.Tasks {
		if r.Rung == RungAnswer && r.Rejected != 0 {
			t.Errorf("answerable rung rejected %d", r.Rejected)
		}
	}
}

// TestJudgedChecks: a task whose check is a judged criterion is rejected
// without a success judge, and proven by replays the judge decides with
// one (the fake judge passes a transcript in which the issue closed).
func TestJudgedChecks(t *testing.T) {
	judged := func(r *fakellm.Request) fakellm.Reply {
		out := mustJSON(map[string]any{"world": trackerWorld("judged", "Issue WS-9 is open (judged)."),
			"tasks": []any{map[string]any{"instruction": "Close WS-9.", "difficulty": "easy",
				"check":     map[string]any{"judge": map[string]any{"criterion": "issue WS-9 ended closed"}},
				"reference": []any{map[string]any{"name": "close_issue", "arguments": map[string]any{"key": "WS-9"}}, "done"}}}})
		return fakellm.Reply{Content: out}
	}
	judgeSrv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, `"id": "WS-9", "status": "closed"`) {
				return fakellm.Reply{Content: `{"success": true, "reason": "closed"}`}
			}
		}
		return fakellm.Reply{Content: `{"success": false, "reason": "still open"}`}
	})
	gen, wm := fakellm.New(judged), fakellm.New(fakeWorldModel(0))
	defer gen.Close()
	defer wm.Close()
	defer judgeSrv.Close()
	o := newOpts(t, gen, wm)
	o.Count, o.Domains = 1, []string{"mcp"}
	st, err := Run(context.Background(), filepath.Join(t.TempDir(), "a"), o)
	if err != nil {
		t.Fatal(err)
	}
	if st.AcceptedWorlds != 0 || !strings.Contains(fmt.Sprint(st.Reasons), "needs a success judge") {
		t.Errorf("without a judge: %+v", st)
	}
	o.SuccessJudge = judge.NewSuccessJudge(worldmodel.New(judgeSrv.URL, "judge", &worldmodel.Options{MaxRetries: -1}), "judge", nil)
	st, err = Run(context.Background(), filepath.Join(t.TempDir(), "b"), o)
	if err != nil {
		t.Fatal(err)
	}
	if st.AcceptedWorlds != 1 || st.AcceptedTasks != 1 {
		t.Errorf("with a judge: %+v", st)
	}
	if judgeSrv.Count() < 15 {
		t.Errorf("the judge decided %d episodes, want the 15 replays", judgeSrv.Count())
	}
}

// TestReplayLedger: the facts fictional worlds' replays assert go to
// LIB/generate/ledger under the world's name, so the contradiction rate of
// generated worlds can be read there (world check --all --ledger).
func TestReplayLedger(t *testing.T) {
	var n atomic.Int64
	wmFlip := func(r *fakellm.Request) fakellm.Reply {
		obs := "1. a result"
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, `"name":"open_page"`) {
			born := "1702"
			if n.Add(1)%3 == 0 {
				born = "1703" // the world model contradicts the canon now and then
			}
			obs = `{"id": "bram", "name": "Bram Kessing", "born": "` + born + `"}`
		}
		return fakellm.Reply{Content: "<predicted_observation>" + obs + "</predicted_observation>"}
	}
	gen, wm := fakellm.New(fakeGenerator(0)), fakellm.New(wmFlip)
	defer gen.Close()
	defer wm.Close()
	o := newOpts(t, gen, wm)
	o.Domains, o.Count = []string{"fiction"}, 1
	dir := filepath.Join(t.TempDir(), "lib")
	st, err := Run(context.Background(), dir, o)
	if err != nil || st.AcceptedWorlds != 1 {
		t.Fatalf("%+v, %v", st, err)
	}
	lib, _ := library.Open(dir)
	fs, err := fiction.NewFileStore(filepath.Join(dir, JournalDir, LedgerDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = lib.Worlds(library.Filter{Source: SourceFiction}, func(w *library.WorldEntry) error {
		name := w.Spec.Name
		facts, _ := fs.WorldFacts(context.Background(), name)
		cs, err := fiction.NewLedger(fs, nil).Contradictions(context.Background(), name, w.Spec.Facts)
		if err != nil {
			return err
		}
		if len(facts) == 0 || len(cs) == 0 {
			t.Errorf("world %s: %d facts, %d contradictions in the replays' ledger; want some of each", name, len(facts), len(cs))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
