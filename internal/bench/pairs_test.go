package bench_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// currentRe finds the sample in a judge message: its current turn is the
// record's current_prompt, "current N".
var currentRe = regexp.MustCompile(`# Current Turn:\n\ncurrent (\d+)`)

var responseRe = regexp.MustCompile("(?s)\\*\\*Response ([AB]):\\*\\*\n```\n(.*?)\n```")

// pairJudge answers pairwise questions as told: "real" names the response
// that is a real observation (OBS-n-t, never OBS-n-pred) or, in reference
// mode, the one equal to the ground truth; "A" always answers A; "random"
// answers from a hash of the question; "bad" answers a box that is not a
// letter for sample 3 and "real" otherwise.
func pairJudge(how *atomic.Value) fakellm.Handler {
	return func(r *fakellm.Request) fakellm.Reply {
		n := sampleOf(r)
		if r.Model != "judge" {
			return fakellm.Reply{Content: fmt.Sprintf("<predicted_observation>OBS-%d-pred</predicted_observation>", n)}
		}
		user := r.Messages[len(r.Messages)-1].Content
		if m := currentRe.FindStringSubmatch(user); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		resp := map[string]string{}
		for _, m := range responseRe.FindAllStringSubmatch(user, -1) {
			resp[m[1]] = m[2]
		}
		box := func(l string) fakellm.Reply { return fakellm.Reply{Content: "Comparing both... \\boxed{" + l + "}"} }
		switch how.Load().(string) {
		case "A":
			return box("A")
		case "random":
			if sha256.Sum256([]byte(user))[0]&1 == 0 {
				return box("A")
			}
			return box("B")
		case "bad":
			if n == 3 {
				return box("C")
			}
		}
		isReal := func(s string) bool { return strings.HasPrefix(s, "OBS-") && !strings.HasSuffix(s, "-pred") }
		if isReal(resp["A"]) {
			return box("A")
		}
		return box("B")
	}
}

func pairOptions(srv *fakellm.Server, data, out, mode string) *bench.Options {
	o := options(srv, data, out)
	o.Rubric, o.JudgeMode = judge.Rubric{}, mode
	return o
}

func runPairs(t *testing.T, o *bench.Options) *bench.Summary {
	t.Helper()
	sum, err := bench.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestTuringFakeJudges: a judge that always finds the real observation
// detects 100%; one that always answers A detects 50% with position bias
// 100% (exactly, in both orders, flipping every time); one that answers at
// random has an interval containing 50%.
func TestTuringFakeJudges(t *testing.T) {
	var how atomic.Value
	srv := fakellm.New(pairJudge(&how))
	defer srv.Close()
	data := t.TempDir()
	writeData(t, data, 140)

	how.Store("real")
	rep := runPairs(t, pairOptions(srv, data, t.TempDir(), bench.ModeTuring)).Report
	if rep.Pair == nil || rep.JudgeMode != bench.ModeTuring {
		t.Fatalf("no turing report: %+v", rep)
	}
	if o := rep.Pair.Overall; o.Rate != 100 || o.Valid != 140 || o.Judgments != 140 || math.IsNaN(float64(o.CI95[0])) {
		t.Errorf("always finds the real one: %+v", o)
	}
	if a := float64(rep.Pair.Overall.PositionA); a < 35 || a > 65 {
		t.Errorf("the seeded order puts the real observation first in %.1f%% of samples, want about half", a)
	}

	how.Store("A")
	o := pairOptions(srv, data, t.TempDir(), bench.ModeTuring)
	o.BothOrders = true
	rep = runPairs(t, o).Report
	html := filepath.Join(t.TempDir(), "r.html")
	if err := bench.WriteHTMLReport(o.Out, html, data, nil); err != nil {
		t.Fatal(err)
	}
	if page, _ := os.ReadFile(html); !bytes.Contains(page, []byte("Turing test")) || !bytes.Contains(page, []byte("<td><b>50.00</b></td>")) {
		t.Errorf("HTML report of a turing run:\n%s", page)
	}
	if s := rep.Pair.Overall; s.Rate != 50 || s.PositionA != 100 || s.FlipRate != 100 || s.Judgments != 280 || s.Pairs != 140 {
		t.Errorf("always A, both orders: %+v", s)
	}
	for d, s := range rep.Pair.Domains {
		if s.Rate != 50 || s.PositionA != 100 {
			t.Errorf("%s: %+v", d, s)
		}
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Turing test", "detection %", "position A %", "flip %", "judge prompts: " + judge.OwnLabel} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}

	how.Store("random")
	rep = runPairs(t, pairOptions(srv, data, t.TempDir(), bench.ModeTuring)).Report
	if ci := rep.Pair.Overall.CI95; !(ci[0] <= 50 && 50 <= ci[1]) {
		t.Errorf("random judge: rate %s, CI %v does not contain 50", rep.Pair.Overall.Rate, ci)
	}
}

// TestTuringBadAnswerIsNamedAndNothingLost: a boxed answer that is not A or
// B fails that sample after its attempts, naming it and the answer; every
// other sample is judged and kept, and --retry-failed later asks only the
// failed one again.
func TestTuringBadAnswerIsNamedAndNothingLost(t *testing.T) {
	var how atomic.Value
	how.Store("bad")
	srv := fakellm.New(pairJudge(&how))
	defer srv.Close()
	data, out := t.TempDir(), t.TempDir()
	writeData(t, data, 14)
	sum := runPairs(t, pairOptions(srv, data, out, bench.ModeTuring))
	if sum.Failed[bench.FailJudgeUnparsable] != 1 || sum.Report.Pair.Overall.Valid != 13 {
		t.Fatalf("failed %v, report %+v", sum.Failed, sum.Report.Pair.Overall)
	}
	if len(sum.Errors) != 1 || !strings.Contains(sum.Errors[0], "id 3 turn 1") || !strings.Contains(sum.Errors[0], `boxed answer "C" is not A or B`) {
		t.Errorf("error %q does not name the sample and the answer", sum.Errors)
	}
	rows := readJudged(t, filepath.Join(out, bench.JudgedFile))
	for _, r := range rows {
		if r.ID == "3" && (r.Attempts != bench.DefaultJudgeAttempts || r.Pair == nil || r.Pair.Judgments[0].Answer != "") {
			t.Errorf("failed row %+v", r)
		}
	}
	// Strict: the failed sample counts as detected.
	strict := bench.Score(rowPtrs(rows), &bench.ScoreOptions{Strict: true}).Pair.Overall
	if strict.Judgments != 14 || math.Abs(float64(strict.Rate)-100) > 1e-9 || strict.Failed != 1 {
		t.Errorf("strict: %+v", strict)
	}
	how.Store("real")
	before := srv.Count()
	o := pairOptions(srv, data, out, bench.ModeTuring)
	o.RetryFailed = true
	sum = runPairs(t, o)
	if srv.Count()-before != 1 || sum.Report.Pair.Overall.Valid != 14 || sum.Report.Pair.Overall.Rate != 100 {
		t.Errorf("retry asked %d questions (want 1); report %+v", srv.Count()-before, sum.Report.Pair.Overall)
	}
}

// TestReferenceMode: a judge that picks the response equal to the ground
// truth prefers the world model's exact predictions to a reference model's
// wrong ones in both orders (no flip); a sample the reference lacks fails
// with a reason; the official template refuses --both-orders.
func TestReferenceMode(t *testing.T) {
	data := t.TempDir()
	writeData(t, data, 21)
	// The world model under test predicts the truth; the reference model
	// predicts something else.
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		n := sampleOf(r)
		switch r.Model {
		case "wm":
			last := r.Messages[len(r.Messages)-1].Content
			turn := sampleRe.FindAllStringSubmatch(last, -1)[0][2]
			return fakellm.Reply{Content: fmt.Sprintf("<predicted_observation>OBS-%d-%s</predicted_observation>", n, turn)}
		case "ref":
			return fakellm.Reply{Content: "<predicted_observation>something else</predicted_observation>"}
		}
		user := r.Messages[len(r.Messages)-1].Content
		resp := map[string]string{}
		for _, m := range responseRe.FindAllStringSubmatch(user, -1) {
			resp[m[1]] = m[2]
		}
		if strings.HasPrefix(resp["A"], "OBS-") {
			return fakellm.Reply{Content: `\boxed{A}`}
		}
		return fakellm.Reply{Content: `\boxed{B}`}
	})
	defer srv.Close()
	refDir := t.TempDir()
	ro := options(srv, data, refDir)
	ro.JudgeModel, ro.Rubric, ro.ModelName = nil, nil, "ref"
	ro.Model = newModel(srv, "ref")
	runPairs(t, ro)

	o := pairOptions(srv, data, t.TempDir(), bench.ModeReference)
	o.Reference, o.BothOrders = filepath.Join(refDir, bench.PredictionsFile), true
	rep := runPairs(t, o).Report
	if s := rep.Pair.Overall; s.Rate != 100 || s.FlipRate != 0 || s.Pairs != 21 || s.PositionA != 50 {
		t.Errorf("reference: %+v", s)
	}

	off, err := judge.LoadPrompts(testkit.WriteOfficialPrompts(t, testkit.OfficialTemplates))
	if err != nil {
		t.Fatal(err)
	}
	o = pairOptions(srv, data, t.TempDir(), bench.ModeReference)
	text := off.Text()
	o.Rubric, o.JudgeText, o.Reference, o.BothOrders = judge.Rubric{Prompts: off}, &text, filepath.Join(refDir, bench.PredictionsFile), true
	if _, err := bench.Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "Response A is the world model's") {
		t.Errorf("official reference template with both orders: %v", err)
	}
	o.Reference = ""
	o.BothOrders = false
	if _, err := bench.Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "--reference") {
		t.Errorf("reference mode without predictions: %v", err)
	}
}

// TestCompareRefusesMixedModes: a turing run and a pointwise run are not
// compared; two turing runs are, like with like.
func TestCompareRefusesMixedModes(t *testing.T) {
	var how atomic.Value
	how.Store("real")
	srv := fakellm.New(pairJudge(&how))
	defer srv.Close()
	data := t.TempDir()
	writeData(t, data, 14)
	a := runPairs(t, pairOptions(srv, data, t.TempDir(), bench.ModeTuring)).Report
	how.Store("A")
	b := runPairs(t, pairOptions(srv, data, t.TempDir(), bench.ModeTuring)).Report
	c := bench.Compare(a, b)
	if c.ModesDiffer() || len(c.Rows) == 0 || c.Rows[len(c.Rows)-3].Metric != "rate" || c.Rows[len(c.Rows)-3].Values[0] != 100 {
		t.Errorf("turing against turing: %+v", c)
	}
	srv2 := fakellm.New(fakeBackend(0))
	defer srv2.Close()
	p := runPairs(t, options(srv2, data, t.TempDir())).Report
	if !bench.Compare(p, a).ModesDiffer() {
		t.Error("pointwise against turing not flagged")
	}
}

func newModel(srv *fakellm.Server, name string) *worldmodel.Client {
	return worldmodel.New(srv.URL, name, &worldmodel.Options{MaxRetryDelay: 5 * time.Millisecond, Timeout: 5 * time.Second})
}

func rowPtrs(rows []bench.Judged) []*bench.Judged {
	out := make([]*bench.Judged, len(rows))
	for i := range rows {
		out[i] = &rows[i]
	}
	return out
}

// TestTuringResumeAfterCancel: a turing run in both orders interrupted
// midway resumes without asking a finished sample again and ends with the
// rows an uninterrupted run writes.
func TestTuringResumeAfterCancel(t *testing.T) {
	var how atomic.Value
	how.Store("random")
	var asked atomic.Int32
	var armed atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := pairJudge(&how)
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		rep := base(r)
		if armed.Load() && r.Model == "judge" && asked.Add(1) == 30 {
			cancel()
		}
		return rep
	})
	defer srv.Close()
	data := t.TempDir()
	writeData(t, data, 60)
	run := func(ctx context.Context, out string) error {
		o := pairOptions(srv, data, out, bench.ModeTuring)
		o.BothOrders = true
		_, err := bench.Run(ctx, o)
		return err
	}
	ref := t.TempDir()
	if err := run(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	pairs := func(dir string) map[string]*bench.PairVerdict {
		m := map[string]*bench.PairVerdict{}
		for _, r := range readJudged(t, filepath.Join(dir, bench.JudgedFile)) {
			m[r.Sample] = r.Pair
		}
		return m
	}
	want := pairs(ref)
	armed.Store(true)
	out := t.TempDir()
	if err := run(ctx, out); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	done := len(pairs(out))
	if done == 0 || done == 60 {
		t.Fatalf("%d samples finished before the interruption; the test needs some but not all", done)
	}
	armed.Store(false)
	before := srv.Count()
	if err := run(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	// Each unfinished sample costs one model and two judge calls at most.
	if got := srv.Count() - before; got > 3*(60-done) {
		t.Errorf("%d requests to finish %d samples", got, 60-done)
	}
	if d := cmp.Diff(want, pairs(out)); d != "" {
		t.Errorf("resumed run differs from an uninterrupted one (-want +got):\n%s", d)
	}
}
