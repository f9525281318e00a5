package bench

import (
	"bytes"
	"strings"
	"testing"
)

func TestTrustSectionAndTaxonomyInCompare(t *testing.T) {
	good := &Scores{Format: 5, Factuality: 5, Consistency: 5, Realism: 5, Quality: 5}
	row := func(sample, pred string, sc *Scores, weak ...string) *Judged {
		return &Judged{Prediction: Prediction{Sample: sample, Task: "mcp", Domain: "mcp", ID: sample, Model: "Qwen3-8B", Prediction: pred},
			Judge: "qwen3-235b", Scores: sc, Weaknesses: weak}
	}
	a := []*Judged{
		row("1", "ok", good),
		row("2", "Sure! Here is the predicted observation: ok", good),
		row("3", "ok", &Scores{Format: 4, Factuality: 1, Consistency: 4, Realism: 4, Quality: 2}, "wrong balance"),
		{Prediction: Prediction{Sample: "4", Task: "mcp", Domain: "mcp", ID: "4", Model: "Qwen3-8B", Failure: FailJudgeUnparsable}, Judge: "qwen3-235b"},
	}
	r := Score(a, &ScoreOptions{Label: "a", Resamples: -1})
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{"Trust report:", "WARNING: judge qwen3-235b and judged model Qwen3-8B", "1 of 4 answers never parsed (25.0%)", "meta_commentary", "not available: one judge only"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if c := r.Trust.Taxonomy; c.Classified["mcp"] != 3 || c.Clean["mcp"] != 1 || c.ByDomain["mcp"]["wrong_fact"] != 1 || c.ByDomain["mcp"]["meta_commentary"] != 1 {
		t.Errorf("taxonomy = %+v", c)
	}
	b := Score(a[:1], &ScoreOptions{Label: "b", Resamples: -1})
	buf.Reset()
	if err := Compare(r, b).WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "Error taxonomy") || !strings.Contains(buf.String(), "wrong_fact") || !strings.Contains(buf.String(), "-33.3") {
		t.Errorf("compare lacks the taxonomy:\n%s", buf.String())
	}
	buf.Reset()
	if err := WriteHTML(r, a, &buf, &HTMLOptions{Worst: -1}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "<h2>Trust report</h2>") || !strings.Contains(buf.String(), "<th>stale_state</th>") {
		t.Error("HTML report lacks the trust report")
	}
}

func TestTuringPicksReachAgree(t *testing.T) {
	rows := []*Judged{
		{Prediction: Prediction{Sample: "1", Task: "web", Domain: "web", ID: "1", Model: "m"}, Judge: "j", JudgeMode: ModeTuring,
			Pair: &PairVerdict{Judgments: []PairJudgment{{A: SideReal, Answer: "A"}}}},
		{Prediction: Prediction{Sample: "2", Task: "web", Domain: "web", ID: "2", Model: "m"}, Judge: "j", JudgeMode: ModeTuring,
			Pair: &PairVerdict{Judgments: []PairJudgment{{A: SideReal, Answer: ""}, {A: SidePrediction, Answer: "A"}}}},
		{Prediction: Prediction{Sample: "3", Task: "web", Domain: "web", ID: "3", Model: "m", Failure: FailJudgeUnparsable}, Judge: "j", JudgeMode: ModeTuring,
			Pair: &PairVerdict{Judgments: []PairJudgment{{A: SideReal}}}},
	}
	s := AgreeSamples(rows)
	if s[0].TuringPick != "truth" || s[1].TuringPick != "prediction" || s[2].TuringPick != "" || !s[2].JudgeUnparsable {
		t.Errorf("picks = %+v", s)
	}
}
