package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/google/go-cmp/cmp"
)

var testDomains = []string{"mcp", "search", "terminal", "swe", "android", "web", "os", "spreadsheet"}

// genJudged builds a judged set with the awkward cases of real runs: zero
// and negative dimensions, all-zero samples, failures of every kind,
// several rows per trajectory.
func genJudged(seed uint64, n int) []*Judged {
	rng := rand.New(rand.NewPCG(seed, 1))
	reasons := []string{FailNoGeneration, FailLength, FailJudgeUnparsable, FailTransport}
	var rows []*Judged
	for i := range n {
		d := testDomains[rng.IntN(len(testDomains))]
		j := &Judged{Prediction: Prediction{
			Sample: fmt.Sprintf("s%d", i), Task: "bench/" + d, Domain: d,
			ID: fmt.Sprint(rng.IntN(12)), TurnIdx: 1 + rng.IntN(5),
		}, Judge: "gpt"}
		switch p := rng.Float64(); {
		case p < 0.1:
			j.Failure = reasons[rng.IntN(len(reasons))]
		case p < 0.12:
			// neither failure nor scores
		default:
			dim := func() int {
				switch q := rng.Float64(); {
				case q < 0.05:
					return 0
				case q < 0.07:
					return -1 - rng.IntN(2)
				default:
					return 1 + rng.IntN(5)
				}
			}
			s := Scores{Format: dim(), Factuality: dim(), Consistency: dim(), Realism: dim(), Quality: dim()}
			if rng.Float64() < 0.02 {
				s = Scores{}
			}
			j.Scores = &s
			j.Total = s.Total()
		}
		rows = append(rows, j)
	}
	return rows
}

// published is a deliberately plain transcription of the published scoring:
// per domain over valid samples, each dimension's mean over non-zero values,
// the mean of non-zero per-sample totals, normalized; pooled over all valid
// samples likewise.
func published(rows []*Judged) (map[string][6]float64, float64) {
	norm := func(vals []float64) float64 {
		if len(vals) == 0 {
			return math.NaN()
		}
		s := 0.0
		for _, v := range vals {
			s += v
		}
		return (s/float64(len(vals)) - 1) / 4 * 100
	}
	total := func(s *Scores) float64 {
		var pos []float64
		for _, v := range []int{s.Format, s.Factuality, s.Consistency, s.Realism, s.Quality} {
			if v > 0 {
				pos = append(pos, float64(v))
			}
		}
		if len(pos) == 0 {
			return 0
		}
		t := 0.0
		for _, v := range pos {
			t += v
		}
		return t / float64(len(pos))
	}
	out := map[string][6]float64{}
	var all []float64
	for _, d := range testDomains {
		var valid []*Scores
		for _, r := range rows {
			if r.Domain == d && r.Failure == "" && r.Scores != nil {
				valid = append(valid, r.Scores)
			}
		}
		var res [6]float64
		for k := range 5 {
			var vals []float64
			for _, s := range valid {
				v := []int{s.Format, s.Factuality, s.Consistency, s.Realism, s.Quality}[k]
				if v != 0 {
					vals = append(vals, float64(v))
				}
			}
			res[k] = norm(vals)
		}
		var totals []float64
		for _, s := range valid {
			if t := total(s); t != 0 {
				totals = append(totals, t)
				all = append(all, t)
			}
		}
		res[5] = norm(totals)
		out[d] = res
	}
	return out, norm(all)
}

func TestScoreMatchesPublished(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		rows := genJudged(seed, 3000)
		want, wantPooled := published(rows)
		r := Score(rows, &ScoreOptions{Resamples: -1})
		var domainTotals []float64
		for _, d := range testDomains {
			ds := r.Domains[d]
			got := [6]float64{float64(ds.Format), float64(ds.Factuality), float64(ds.Consistency), float64(ds.Realism), float64(ds.Quality), float64(ds.Total)}
			for k := range 6 {
				if math.Abs(got[k]-want[d][k]) > 1e-9 {
					t.Errorf("seed %d %s metric %d: got %.12f, published %.12f", seed, d, k, got[k], want[d][k])
				}
			}
			domainTotals = append(domainTotals, want[d][5])
		}
		if math.Abs(float64(r.OverallSampleMean)-wantPooled) > 1e-9 {
			t.Errorf("pooled: got %.12f, published %.12f", r.OverallSampleMean, wantPooled)
		}
		mean := 0.0
		for _, x := range domainTotals {
			mean += x
		}
		mean /= float64(len(domainTotals))
		if math.Abs(float64(r.OverallDomainMean)-mean) > 1e-9 {
			t.Errorf("domain mean: got %.12f, want %.12f", r.OverallDomainMean, mean)
		}
	}
}

// rowsForScore builds 500 judged rows of one domain whose domain score is
// exactly s: the per-sample totals average 1 + 4s/100.
func rowsForScore(d string, s float64) []*Judged {
	const n = 500
	sum := int(math.Round(5 * n * (1 + 4*s/100))) // total of all dimension values
	base, extra := sum/n, sum%n
	var rows []*Judged
	for i := range n {
		k := base
		if i < extra {
			k++
		}
		var v [5]int
		for j := range 5 {
			v[j] = k / 5
			if j < k%5 {
				v[j]++
			}
		}
		sc := Scores{Format: v[0], Factuality: v[1], Consistency: v[2], Realism: v[3], Quality: v[4]}
		rows = append(rows, &Judged{Prediction: Prediction{Sample: fmt.Sprintf("%s-%d", d, i), Task: d, Domain: d, ID: fmt.Sprint(i / 4)}, Scores: &sc, Total: sc.Total()})
	}
	return rows
}

func TestHeadlineIsDomainMean(t *testing.T) {
	published := map[string]float64{"mcp": 64.79, "search": 36.69, "terminal": 53.96, "swe": 65.63, "android": 58.17, "web": 49.55, "os": 65.92}
	var rows []*Judged
	for d, s := range published {
		rows = append(rows, rowsForScore(d, s)...)
	}
	r := Score(rows, &ScoreOptions{Resamples: 50})
	for d, s := range published {
		if got := float64(r.Domains[d].Total); math.Abs(got-s) > 1e-9 {
			t.Errorf("%s: %.12f, want %.2f", d, got, s)
		}
	}
	if got := fmt.Sprintf("%.2f", float64(r.OverallDomainMean)); got != "56.39" {
		t.Errorf("headline %s, want 56.39", got)
	}
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "Overall (mean of domain scores, leaderboard headline): 56.39") {
		t.Errorf("text output lacks the 56.39 headline:\n%s", buf.String())
	}
}

func TestScoreStrictAndFailures(t *testing.T) {
	sc := func(v int) *Scores {
		s := Scores{Format: v, Factuality: v, Consistency: v, Realism: v, Quality: v}
		return &s
	}
	rows := []*Judged{
		{Prediction: Prediction{Sample: "a", Domain: "mcp", Task: "mcp", ID: "1"}, Scores: sc(5)},
		{Prediction: Prediction{Sample: "b", Domain: "mcp", Task: "mcp", ID: "2"}, Scores: sc(3)},
		{Prediction: Prediction{Sample: "c", Domain: "mcp", Task: "mcp", ID: "3", Failure: FailLength}},
		{Prediction: Prediction{Sample: "d", Domain: "mcp", Task: "mcp", ID: "4", Failure: FailLength}},
		{Prediction: Prediction{Sample: "e", Domain: "mcp", Task: "mcp", ID: "5"}},
	}
	r := Score(rows, &ScoreOptions{Resamples: -1})
	ds := r.Domains["mcp"]
	if ds.N != 5 || ds.Valid != 2 || ds.Failed != 3 {
		t.Errorf("counts %d/%d/%d", ds.N, ds.Valid, ds.Failed)
	}
	if float64(ds.Total) != 75 { // mean(5,3)=4 → 75
		t.Errorf("excluded total %v, want 75", ds.Total)
	}
	if diff := cmp.Diff(map[string]map[string]int{"mcp": {FailLength: 2, FailUnscored: 1}}, r.Failures); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
	strict := Score(rows, &ScoreOptions{Strict: true, Resamples: -1})
	if got := float64(strict.Domains["mcp"].Total); math.Abs(got-Normalize(11.0/5)) > 1e-12 { // (5+3+1+1+1)/5
		t.Errorf("strict total %v, want %v", got, Normalize(11.0/5))
	}
	if strict.Domains["mcp"].Valid != 2 || strict.Domains["mcp"].Failed != 3 {
		t.Error("strict must not change the counts")
	}
}

func TestScoreJSONShape(t *testing.T) {
	r := Score(genJudged(7, 400), nil)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]json.RawMessage) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	if diff := cmp.Diff([]string{"domains", "failures", "judge_prompts", "overall_domain_mean", "overall_sample_mean"}, keys(top)); diff != "" {
		t.Errorf("top-level keys (-want +got):\n%s", diff)
	}
	var doms map[string]map[string]json.RawMessage
	if err := json.Unmarshal(top["domains"], &doms); err != nil {
		t.Fatal(err)
	}
	want := []string{"ci95", "consistency", "factuality", "failed", "format", "n", "quality", "realism", "total", "valid"}
	for d, m := range doms {
		if diff := cmp.Diff(want, keys(m)); diff != "" {
			t.Errorf("%s keys (-want +got):\n%s", d, diff)
		}
		var ci [2]float64
		if err := json.Unmarshal(m["ci95"], &ci); err != nil || !(ci[0] <= ci[1]) {
			t.Errorf("%s ci95 %s", d, m["ci95"])
		}
	}
	// A domain with no counted sample writes null, not NaN.
	only := Score([]*Judged{{Prediction: Prediction{Domain: "os", Failure: FailTransport}}}, nil)
	b, err = json.Marshal(only)
	if err != nil || !strings.Contains(string(b), `"total":null`) {
		t.Errorf("%s %v", b, err)
	}
}

func TestBootstrapClusteredAndSeeded(t *testing.T) {
	rows := genJudged(11, 1500)
	a := Score(rows, &ScoreOptions{Resamples: 300, Seed: 5})
	b := Score(rows, &ScoreOptions{Resamples: 300, Seed: 5})
	if a.Domains["web"].CI95 != b.Domains["web"].CI95 || a.OverallCI95 != b.OverallCI95 {
		t.Error("same seed, different intervals")
	}
	for _, d := range a.Order {
		ds := a.Domains[d]
		if !(ds.CI95[0] <= ds.Total && ds.Total <= ds.CI95[1]) {
			t.Errorf("%s: total %v outside its CI %v", d, ds.Total, ds.CI95)
		}
	}
	// Duplicating every row inside its own trajectory must not narrow the
	// interval: clusters, not rows, are resampled.
	var dup []*Judged
	for _, r := range rows {
		c := *r
		c.Sample += "-copy"
		dup = append(dup, r, &c)
	}
	d := Score(dup, &ScoreOptions{Resamples: 300, Seed: 5})
	wa := float64(a.Domains["swe"].CI95[1] - a.Domains["swe"].CI95[0])
	wd := float64(d.Domains["swe"].CI95[1] - d.Domains["swe"].CI95[0])
	if wd < 0.9*wa {
		t.Errorf("duplicated rows narrowed the clustered CI: %.3f → %.3f", wa, wd)
	}
}

func TestReadJudged(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "judged.jsonl")
	rows := genJudged(3, 5)
	var buf bytes.Buffer
	for _, r := range rows {
		b, _ := trajectory.Marshal(r)
		buf.Write(append(b, '\n'))
	}
	// A resumed run appended sample s1 again with a new result.
	again := *rows[1]
	again.Judge = "second"
	b, _ := trajectory.Marshal(&again)
	buf.Write(append(b, '\n'))
	if err := os.WriteFile(good, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJudged(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[1].Judge != "second" {
		t.Errorf("got %d rows, row 1 judge %q", len(got), got[1].Judge)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(buf.String()+"{not json\n"), 0o644)
	_, err = ReadJudged(bad)
	var le *trajectory.LineError
	if !errors.As(err, &le) || le.Line != 7 || !strings.Contains(err.Error(), "bad.jsonl:7") {
		t.Errorf("error %v does not name bad.jsonl:7", err)
	}
}

// TestBootstrapNeedsTwoTrajectories checks that a domain with a single
// trajectory gets no interval (resampling one cluster is a zero-width
// interval that claims certainty it does not have), that other domains keep
// theirs, and that the overall interval is then unknown too.
func TestBootstrapNeedsTwoTrajectories(t *testing.T) {
	var rows []*Judged
	first := ""
	for _, r := range genJudged(11, 1500) {
		if r.Domain == "os" {
			key := r.Task + "\x00" + r.ID
			if first == "" {
				first = key
			}
			if key != first {
				continue
			}
		}
		rows = append(rows, r)
	}
	rep := Score(rows, &ScoreOptions{Resamples: 200, Seed: 5})
	if rep.Domains["os"].Clusters != 1 {
		t.Fatalf("os has %d trajectories, want 1", rep.Domains["os"].Clusters)
	}
	nan := func(ci [2]Num) bool { return math.IsNaN(float64(ci[0])) && math.IsNaN(float64(ci[1])) }
	if !nan(rep.Domains["os"].CI95) || !nan(rep.Domains["os"].DimCI95[0]) || !nan(rep.OverallCI95) {
		t.Errorf("single-trajectory intervals: os %v dims %v overall %v, want unknown", rep.Domains["os"].CI95, rep.Domains["os"].DimCI95, rep.OverallCI95)
	}
	if web := rep.Domains["web"].CI95; nan(web) || web[0] >= web[1] {
		t.Errorf("web interval %v, want a real one", web)
	}
	b, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(b), `"ci95":null`) || strings.Contains(string(b), `[null,null]`) {
		t.Errorf("unknown intervals should be written as null: %s", b)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || !nan(back.Domains["os"].CI95) || nan(back.Domains["web"].CI95) {
		t.Errorf("read back: %v os %v web %v", err, back.Domains["os"].CI95, back.Domains["web"].CI95)
	}
}
