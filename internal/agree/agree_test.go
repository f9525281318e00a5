package agree

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/score"
)

func uniformScores(v int) score.Scores {
	return score.Scores{Format: v, Factuality: v, Consistency: v, Realism: v, Quality: v}
}

// fixture builds two judges' samples of five models in two domains, each
// sample scoring the model's level on every dimension: judge A ranks
// m1 > m2 > m3 > m4 > m5 everywhere, judge B swaps m3 and m4.
func fixture() []Sample {
	levels := map[string][5]int{
		"judge-a": {5, 4, 3, 2, 1},
		"judge-b": {5, 4, 2, 3, 1},
	}
	var out []Sample
	for _, j := range []string{"judge-a", "judge-b"} {
		for mi := range 5 {
			for _, d := range []string{"terminal", "mcp"} {
				for c := range 4 {
					out = append(out, Sample{Key: fmt.Sprintf("%s-%d", d, c), Cluster: fmt.Sprintf("traj%d", c), Domain: d,
						Model: fmt.Sprintf("m%d", mi+1), Judge: j, Scores: uniformScores(levels[j][mi])})
				}
			}
		}
	}
	return out
}

func TestAnalyzeKnownRankings(t *testing.T) {
	r := Analyze(fixture(), nil, &Options{Resamples: 200})
	if len(r.Pairs) != 3 { // terminal, mcp, overall
		t.Fatalf("pairs = %d, want 3: %+v", len(r.Pairs), r.Pairs)
	}
	for _, p := range r.Pairs {
		if p.Models != 5 || float64(p.Spearman) != 0.9 || math.Abs(float64(p.Kendall)-0.8) > 1e-12 {
			t.Errorf("%s: models %d ρ %v τ %v, want 5, 0.9, 0.8", p.Domain, p.Models, p.Spearman, p.Kendall)
		}
		// Every sample of a model scores alike, so every resample ranks
		// the same way: the interval is the point.
		if float64(p.SpearmanCI[0]) != 0.9 || float64(p.SpearmanCI[1]) != 0.9 {
			t.Errorf("%s: ρ CI %v, want [0.9, 0.9]", p.Domain, p.SpearmanCI)
		}
	}
	var overallB *Ranking
	for i := range r.Rankings {
		if r.Rankings[i].Judge == "judge-b" && r.Rankings[i].Domain == Overall {
			overallB = &r.Rankings[i]
		}
	}
	if overallB == nil {
		t.Fatal("no overall ranking of judge-b")
	}
	order := []string{}
	for _, m := range overallB.Models {
		order = append(order, m.Model)
	}
	if got := strings.Join(order, ","); got != "m1,m2,m4,m3,m5" {
		t.Errorf("judge-b overall order = %s", got)
	}
	if s := float64(overallB.Models[0].Score); s != 100 {
		t.Errorf("m1 score = %v, want 100", s)
	}
	if len(r.Samples) != 1 || r.Samples[0].N != 40 {
		t.Fatalf("sample correlations = %+v", r.Samples)
	}
}

func TestAnalyzeIntervalsWiden(t *testing.T) {
	// Noisy per-sample scores: the interval must hold the point estimate
	// and have some width.
	rng := rand.New(rand.NewPCG(1, 2))
	var s []Sample
	for _, j := range []string{"a", "b"} {
		for mi := range 6 {
			for c := range 30 {
				v := min(5, max(1, 1+mi*4/5+rng.IntN(2)))
				s = append(s, Sample{Key: fmt.Sprint(c), Cluster: fmt.Sprint(c), Domain: "web", Model: fmt.Sprint("m", mi), Judge: j, Scores: uniformScores(v)})
			}
		}
	}
	r := Analyze(s, nil, nil)
	p := r.Pairs[0]
	if !(p.SpearmanCI[0] <= p.Spearman && p.Spearman <= p.SpearmanCI[1]) || p.SpearmanCI[0] == p.SpearmanCI[1] {
		t.Errorf("ρ %v CI %v", p.Spearman, p.SpearmanCI)
	}
}

func TestParseFailuresAndFamily(t *testing.T) {
	s := []Sample{
		{Key: "1", Domain: "mcp", Model: "Qwen/Qwen3-8B", Judge: "qwen3-235b", Scores: uniformScores(3)},
		{Key: "2", Domain: "mcp", Model: "Qwen/Qwen3-8B", Judge: "qwen3-235b", Failed: true, JudgeUnparsable: true},
		{Key: "3", Domain: "mcp", Model: "Qwen/Qwen3-8B", Judge: "qwen3-235b", Failed: true}, // no generation: never judged
		{Key: "4", Domain: "mcp", Model: "Qwen/Qwen3-8B", Judge: "qwen3-235b", Scores: uniformScores(4)},
	}
	r := Analyze(s, nil, nil)
	if p := r.ParseFailures[0]; p.Judged != 3 || p.Unparsable != 1 || math.Abs(float64(p.Rate)-1.0/3) > 1e-12 {
		t.Errorf("parse failures = %+v", p)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "Qwen family") {
		t.Errorf("warnings = %q", r.Warnings)
	}
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"WARNING: judge qwen3-235b", "1 of 3 judged (33.3%)", "one judge only", "no human labels"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, buf.String())
		}
	}
	if Family("gpt-5.4") != "OpenAI" || Family("claude-opus-4.6") != "Anthropic" || Family("rules") != "" {
		t.Error("Family misnames a known model")
	}
}

// Synthetic human labels of known κ: the judge's scores are uniform on
// 1..5 and a person agrees with probability p, otherwise rates uniformly
// at random. Both raters' marginals are then uniform, the expected
// weighted disagreement is (1−p) times chance, so the population's
// quadratic κ is exactly p; the sample's must land near it and its
// interval must hold it.
func TestHumanKappaRecovered(t *testing.T) {
	for _, p := range []float64{0.3, 0.6, 0.85} {
		rng := rand.New(rand.NewPCG(uint64(p*100), 9))
		var samples []Sample
		var labels []Label
		for i := range 600 {
			j := 1 + rng.IntN(5)
			h := j
			if rng.Float64() >= p {
				h = 1 + rng.IntN(5)
			}
			key := fmt.Sprint(i)
			samples = append(samples, Sample{Key: key, Cluster: key, Domain: "os", Model: "m", Judge: "j", Scores: score.Scores{Factuality: j}})
			labels = append(labels, Label{Model: "m", Key: key, Labeler: "ann", Scores: score.Scores{Factuality: h}})
		}
		labels = append(labels, Label{Model: "m", Key: "unknown", Scores: uniformScores(3)})
		r := Analyze(samples, labels, &Options{Resamples: 400})
		var h *HumanAgreement
		for i := range r.Human {
			if r.Human[i].Dimension == "factuality" {
				h = &r.Human[i]
			}
		}
		if h == nil || h.N != 600 {
			t.Fatalf("p=%v: human = %+v", p, r.Human)
		}
		if !(float64(h.KappaCI[0]) <= p && p <= float64(h.KappaCI[1])) {
			t.Errorf("p=%v: κ %v CI %v does not hold p", p, h.Kappa, h.KappaCI)
		}
		// With two coders and many units α comes close to κ.
		if math.Abs(float64(h.Alpha-h.Kappa)) > 0.01 || !(float64(h.AlphaCI[0]) <= p && p <= float64(h.AlphaCI[1])) {
			t.Errorf("p=%v: α %v CI %v, κ %v", p, h.Alpha, h.AlphaCI, h.Kappa)
		}
		if r.UnmatchedLabels != 1 {
			t.Errorf("unmatched = %d, want 1", r.UnmatchedLabels)
		}
	}
}

func TestTuringPicks(t *testing.T) {
	var samples []Sample
	var labels []Label
	for i := range 10 {
		key := fmt.Sprint(i)
		samples = append(samples, Sample{Key: key, Cluster: key, Domain: "web", Model: "m", Judge: "j", Scores: uniformScores(3)})
		pick := PickTruth
		if i < 3 {
			pick = PickPrediction
		}
		labels = append(labels, Label{Model: "m", Key: key, TuringPick: pick})
	}
	r := Analyze(samples, labels, nil)
	if len(r.Turing) != 1 || r.Turing[0].Picks != 10 || math.Abs(float64(r.Turing[0].Fooled)-0.3) > 1e-12 {
		t.Fatalf("turing = %+v", r.Turing)
	}
	found := false
	for _, g := range r.Gaps {
		found = found || strings.Contains(g, "no Turing picks")
	}
	if !found {
		t.Errorf("gaps = %q: the judge's missing Turing picks are not named", r.Gaps)
	}
}

func TestTuringAgreementWithJudge(t *testing.T) {
	var samples []Sample
	var labels []Label
	// The judge and the person agree on 8 of 10 picks.
	judge := []string{PickTruth, PickTruth, PickTruth, PickPrediction, PickPrediction, PickTruth, PickPrediction, PickTruth, PickTruth, PickPrediction}
	human := []string{PickTruth, PickTruth, PickTruth, PickPrediction, PickPrediction, PickTruth, PickTruth, PickTruth, PickPrediction, PickPrediction}
	for i := range judge {
		key := fmt.Sprint(i)
		samples = append(samples, Sample{Key: key, Cluster: key, Domain: "web", Model: "m", Judge: "j", Failed: true, TuringPick: judge[i]})
		labels = append(labels, Label{Model: "m", Key: key, TuringPick: human[i]})
	}
	r := Analyze(samples, labels, &Options{Resamples: 100})
	var h *HumanAgreement
	for i := range r.Human {
		if r.Human[i].Dimension == "turing" {
			h = &r.Human[i]
		}
	}
	// 2×2 table [[5,1],[1,3]]: po = 0.8, pe = 0.6·0.6 + 0.4·0.4 = 0.52,
	// κ = (0.8 − 0.52)/(1 − 0.52) = 0.5833…
	if h == nil || h.N != 10 || math.Abs(float64(h.Kappa)-0.28/0.48) > 1e-12 {
		t.Fatalf("turing agreement = %+v", r.Human)
	}
	for _, g := range r.Gaps {
		if strings.Contains(g, "no Turing picks") {
			t.Errorf("gap named although the judge picked: %q", g)
		}
	}
}

// TestUnknownIntervalIsNull: an interval that cannot be computed (no
// bootstrap resamples) is written as null, as the benchmark writes one,
// and a known one as [low, high].
func TestUnknownIntervalIsNull(t *testing.T) {
	r := Analyze(fixture(), nil, &Options{Resamples: -1})
	b, err := json.Marshal(r.Pairs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"spearman_ci95":null`) || strings.Contains(string(b), "[null") {
		t.Errorf("unknown interval: %s", b)
	}
	b, _ = json.Marshal(CI{0.25, 0.5})
	if string(b) != "[0.25,0.5]" {
		t.Errorf("known interval: %s", b)
	}
}
