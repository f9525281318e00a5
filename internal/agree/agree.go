package agree

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/score"
)

// Bootstrap defaults: resamples and seed of every interval, fixed so the
// same inputs always print the same intervals.
const (
	DefaultResamples = 1000
	DefaultSeed      = 20261202
)

// Overall names the ranking over all domains: the unweighted mean of the
// domain scores, as the leaderboard's headline.
const Overall = "overall"

// Turing picks: which of two observations, shown in random order with their
// sources hidden, a person (or a Turing-mode judge) took for the real one.
const (
	PickTruth      = "truth"
	PickPrediction = "prediction"
)

// Sample is one judged prediction as agreement sees it.
type Sample struct {
	// Key identifies the input row (the benchmark's sample hash); with
	// Model it identifies the prediction.
	Key string
	// Cluster is the trajectory the row belongs to: rows of one trajectory
	// share their history, so they are resampled together.
	Cluster string
	Domain  string
	Model   string
	Judge   string
	// Scores are the judge's dimensions; only read when Failed is false.
	Scores score.Scores
	// Failed marks a sample left out of the means (no generation, judge
	// never parsed, …); JudgeUnparsable says the judge answered but never
	// parsably.
	Failed, JudgeUnparsable bool
	// TuringPick is what a Turing-mode judge picked (PickTruth or
	// PickPrediction); "" when the judge was not asked.
	TuringPick string
}

// Label is one person's judgement of one prediction.
type Label struct {
	Model, Key string
	// Labeler names who labelled; labels of several people on one
	// prediction are all counted.
	Labeler string
	// Scores are the person's five dimensions, 0 where not given.
	Scores score.Scores
	// TuringPick is the person's pick (PickTruth or PickPrediction); "" for
	// a dimension label.
	TuringPick string
}

// Options tune [Analyze]; nil means defaults.
type Options struct {
	// Resamples for every bootstrap interval. Zero: DefaultResamples;
	// negative: no intervals (NaN).
	Resamples int
	// Seed of the bootstraps. Zero: DefaultSeed.
	Seed uint64
}

// Num is a statistic; NaN (unknown) is written as JSON null.
type Num float64

// MarshalJSON writes NaN and infinities as null.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return []byte(fmt.Sprintf("%.6g", f)), nil
}

// String renders n with three decimals, "-" for NaN.
func (n Num) String() string {
	if math.IsNaN(float64(n)) {
		return "-"
	}
	return fmt.Sprintf("%.3f", float64(n))
}

// CI is a 95% bootstrap interval (percentiles 2.5 and 97.5).
type CI [2]Num

func (c CI) String() string {
	if math.IsNaN(float64(c[0])) {
		return "-"
	}
	return "[" + c[0].String() + ", " + c[1].String() + "]"
}

// MarshalJSON writes [low, high], or null when a bound is unknown (see
// [score.Interval]).
func (c CI) MarshalJSON() ([]byte, error) { return score.Interval[Num](c).MarshalJSON() }

// UnmarshalJSON reads [low, high] or null.
func (c *CI) UnmarshalJSON(b []byte) error { return (*score.Interval[Num])(c).UnmarshalJSON(b) }

func toCI(v [2]float64) CI { return CI{Num(v[0]), Num(v[1])} }

// ModelScore is one model's place in one judge's ranking.
type ModelScore struct {
	Model string `json:"model"`
	// Score is the 0–100 total ((mean−1)/4×100), Rank 1 the best (ties
	// share the mean rank).
	Score Num     `json:"score"`
	Rank  float64 `json:"rank"`
	N     int     `json:"n"`
}

// Ranking is one judge's order of the models in one domain (or Overall).
type Ranking struct {
	Judge  string       `json:"judge"`
	Domain string       `json:"domain"`
	Models []ModelScore `json:"models"`
}

// JudgePair is how two judges' rankings of the same models agree in one
// domain (or Overall).
type JudgePair struct {
	Judges [2]string `json:"judges"`
	Domain string    `json:"domain"`
	// Models counts the models both judges scored there.
	Models     int `json:"models"`
	Spearman   Num `json:"spearman"`
	SpearmanCI CI  `json:"spearman_ci95"`
	Kendall    Num `json:"kendall_tau_b"`
	KendallCI  CI  `json:"kendall_tau_b_ci95"`
}

// SampleCorrelation is how two judges' totals of the same predictions
// correlate, sample by sample.
type SampleCorrelation struct {
	Judges   [2]string `json:"judges"`
	N        int       `json:"n"`
	Pearson  Num       `json:"pearson"`
	Spearman Num       `json:"spearman"`
}

// ParseRate is how often a judge's answer could not be parsed.
type ParseRate struct {
	Judge string `json:"judge"`
	// Judged counts samples that reached the judge; Unparsable those whose
	// every attempt failed to parse.
	Judged     int `json:"judged"`
	Unparsable int `json:"unparsable"`
	Rate       Num `json:"rate"`
}

// HumanAgreement is how one judge agrees with people on one dimension
// ("total" pools the five dimensions, "turing" compares Turing picks).
type HumanAgreement struct {
	Judge     string `json:"judge"`
	Dimension string `json:"dimension"`
	// N counts the (label, judge score) pairs compared.
	N       int `json:"n"`
	Kappa   Num `json:"kappa_quadratic"`
	KappaCI CI  `json:"kappa_quadratic_ci95"`
	// Alpha is Krippendorff's α at AlphaLevel, the people and the judge
	// as coders.
	Alpha      Num   `json:"alpha"`
	AlphaCI    CI    `json:"alpha_ci95"`
	AlphaLevel Level `json:"alpha_level"`
}

// TuringRate is how often people took a model's prediction for the real
// observation.
type TuringRate struct {
	Model string `json:"model"`
	Picks int    `json:"picks"`
	// Fooled is the share of picks that chose the prediction; 0.5 is
	// indistinguishable from the truth.
	Fooled   Num `json:"fooled"`
	FooledCI CI  `json:"fooled_ci95"`
}

// Report is what [Analyze] found. Gaps names each figure it could not give
// and why; Warnings what a reader must know before trusting the others.
type Report struct {
	Models        []string            `json:"models"`
	Judges        []string            `json:"judges"`
	Domains       []string            `json:"domains"`
	Rankings      []Ranking           `json:"rankings"`
	Pairs         []JudgePair         `json:"judge_pairs"`
	Samples       []SampleCorrelation `json:"sample_correlations"`
	ParseFailures []ParseRate         `json:"parse_failures"`
	Human         []HumanAgreement    `json:"human"`
	Turing        []TuringRate        `json:"turing"`
	Labels        int                 `json:"labels"`
	// UnmatchedLabels counts labels of a prediction none of the samples is.
	UnmatchedLabels int      `json:"unmatched_labels"`
	Warnings        []string `json:"warnings"`
	Gaps            []string `json:"gaps"`
	Resamples       int      `json:"resamples"`
	Seed            uint64   `json:"seed"`
}

// system is one (model, judge) pair: one run of the benchmark.
type system struct{ model, judge string }

// Analyze computes every agreement figure the samples and labels allow.
func Analyze(samples []Sample, labels []Label, opts *Options) *Report {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Resamples == 0 {
		o.Resamples = DefaultResamples
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	r := &Report{Resamples: max(o.Resamples, 0), Seed: o.Seed, Labels: len(labels)}
	models, judges, doms := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, s := range samples {
		models[s.Model], judges[s.Judge], doms[s.Domain] = true, true, true
	}
	r.Models, r.Judges = sortedKeys(models), sortedKeys(judges)
	r.Domains = domainOrder(doms)

	r.parseRates(samples)
	r.familyWarnings(samples)
	t := newTable(samples, r.Domains)
	r.rankings(t)
	r.judgePairs(t, o)
	r.sampleCorrelations(samples)
	r.human(samples, labels, o)

	if len(r.Judges) < 2 {
		r.Gaps = append(r.Gaps, "one judge only: no agreement between judges (run `bench agree` over runs of the same models under several judges)")
	}
	if len(r.Models) < 3 {
		r.Gaps = append(r.Gaps, fmt.Sprintf("%d model(s): rank correlations need at least 3 models judged alike", len(r.Models)))
	}
	if len(labels) == 0 {
		r.Gaps = append(r.Gaps, "no human labels: no κ or α against people (label samples in `agentworld ui --labels`)")
	}
	return r
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// domainOrder is the leaderboard order, unknown domains after, sorted.
func domainOrder(m map[string]bool) []string {
	var out []string
	for _, d := range domain.All {
		if m[string(d)] {
			out = append(out, string(d))
		}
	}
	var rest []string
	for d := range m {
		if !domain.Domain(d).Known() {
			rest = append(rest, d)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func (r *Report) parseRates(samples []Sample) {
	by := map[string]*ParseRate{}
	for _, s := range samples {
		p := by[s.Judge]
		if p == nil {
			p = &ParseRate{Judge: s.Judge}
			by[s.Judge] = p
		}
		switch {
		case s.JudgeUnparsable:
			p.Judged++
			p.Unparsable++
		case !s.Failed:
			p.Judged++
		}
	}
	for _, j := range r.Judges {
		p := by[j]
		p.Rate = Num(math.NaN())
		if p.Judged > 0 {
			p.Rate = Num(float64(p.Unparsable) / float64(p.Judged))
		}
		r.ParseFailures = append(r.ParseFailures, *p)
	}
}

func (r *Report) familyWarnings(samples []Sample) {
	seen := map[system]bool{}
	for _, s := range samples {
		k := system{s.Model, s.Judge}
		if seen[k] {
			continue
		}
		seen[k] = true
		if f := Family(s.Model); f != "" && f == Family(s.Judge) {
			r.Warnings = append(r.Warnings, fmt.Sprintf("judge %s and judged model %s are both of the %s family: a judge may favour its own family's outputs", s.Judge, s.Model, f))
		}
	}
	sort.Strings(r.Warnings)
}

// families maps name fragments to model families, most specific first.
var families = []struct{ frag, family string }{
	{"qwen", "Qwen"}, {"qwq", "Qwen"},
	{"gpt", "OpenAI"}, {"openai", "OpenAI"}, {"o1-", "OpenAI"}, {"o3-", "OpenAI"}, {"o4-", "OpenAI"},
	{"claude", "Anthropic"}, {"anthropic", "Anthropic"},
	{"gemini", "Google"}, {"gemma", "Google"},
	{"llama", "Meta"},
	{"deepseek", "DeepSeek"},
	{"mistral", "Mistral"}, {"mixtral", "Mistral"}, {"codestral", "Mistral"},
	{"phi-", "Microsoft"},
	{"glm", "Zhipu"},
	{"kimi", "Moonshot"},
	{"grok", "xAI"},
	{"minimax", "MiniMax"},
}

// Family names the model family of a model name ("Qwen/Qwen3-8B" →
// "Qwen"), or "" when it is not one Family knows. A family shared by judge
// and judged model is a known source of bias.
func Family(name string) string {
	n := strings.ToLower(name)
	for _, f := range families {
		if strings.Contains(n, f.frag) {
			return f.family
		}
	}
	return ""
}

// table holds, per domain, the per-trajectory sums of every system's
// sample totals, so a bootstrap draw is a sum over drawn clusters.
type table struct {
	systems []system
	domains []string
	// clusters[d] is domain d's cluster keys, sorted; sum[d][s][c] and
	// cnt[d][s][c] the non-zero totals of system s in cluster c.
	clusters [][]string
	sum, cnt [][][]float64
}

func newTable(samples []Sample, domains []string) *table {
	t := &table{domains: domains}
	sysAt := map[system]int{}
	dAt := map[string]int{}
	for i, d := range domains {
		dAt[d] = i
	}
	cl := make([]map[string]bool, len(domains))
	for i := range cl {
		cl[i] = map[string]bool{}
	}
	for _, s := range samples {
		k := system{s.Model, s.Judge}
		if _, ok := sysAt[k]; !ok {
			sysAt[k] = len(t.systems)
			t.systems = append(t.systems, k)
		}
		cl[dAt[s.Domain]][s.Cluster] = true
	}
	cAt := make([]map[string]int, len(domains))
	for i := range domains {
		t.clusters = append(t.clusters, sortedKeys(cl[i]))
		cAt[i] = map[string]int{}
		for j, c := range t.clusters[i] {
			cAt[i][c] = j
		}
		sum, cnt := make([][]float64, len(t.systems)), make([][]float64, len(t.systems))
		for s := range t.systems {
			sum[s], cnt[s] = make([]float64, len(t.clusters[i])), make([]float64, len(t.clusters[i]))
		}
		t.sum, t.cnt = append(t.sum, sum), append(t.cnt, cnt)
	}
	for _, s := range samples {
		if s.Failed {
			continue
		}
		tot := s.Scores.Total()
		if tot == 0 {
			continue
		}
		d := dAt[s.Domain]
		c := cAt[d][s.Cluster]
		si := sysAt[system{s.Model, s.Judge}]
		t.sum[d][si][c] += tot
		t.cnt[d][si][c]++
	}
	return t
}

// scores returns every system's score per domain and overall (last),
// counting cluster c of domain d draw[d][c] times (nil: once each).
func (t *table) scores(draw [][]int) (out [][]float64, counts [][]int) {
	out = make([][]float64, len(t.domains)+1)
	counts = make([][]int, len(t.domains)+1)
	for d := range t.domains {
		out[d] = make([]float64, len(t.systems))
		counts[d] = make([]int, len(t.systems))
		for s := range t.systems {
			var sum, n float64
			for c := range t.clusters[d] {
				w := 1.0
				if draw != nil {
					w = float64(draw[d][c])
				}
				sum += w * t.sum[d][s][c]
				n += w * t.cnt[d][s][c]
			}
			out[d][s] = math.NaN()
			if n > 0 {
				out[d][s] = (sum/n - 1) / 4 * 100
			}
			counts[d][s] = int(n)
		}
	}
	all := len(t.domains)
	out[all] = make([]float64, len(t.systems))
	counts[all] = make([]int, len(t.systems))
	for s := range t.systems {
		var sum float64
		var n int
		for d := range t.domains {
			if v := out[d][s]; !math.IsNaN(v) {
				sum += v
				n++
				counts[all][s] += counts[d][s]
			}
		}
		out[all][s] = math.NaN()
		if n > 0 {
			out[all][s] = sum / float64(n)
		}
	}
	return out, counts
}

func (t *table) domainName(i int) string {
	if i == len(t.domains) {
		return Overall
	}
	return t.domains[i]
}

func (r *Report) rankings(t *table) {
	sc, counts := t.scores(nil)
	for di := range sc {
		for _, j := range r.Judges {
			var ms []ModelScore
			for s, sys := range t.systems {
				if sys.judge != j || math.IsNaN(sc[di][s]) {
					continue
				}
				ms = append(ms, ModelScore{Model: sys.model, Score: Num(sc[di][s]), N: counts[di][s]})
			}
			if len(ms) == 0 {
				continue
			}
			neg := make([]float64, len(ms))
			for i, m := range ms {
				neg[i] = -float64(m.Score)
			}
			for i, rk := range Ranks(neg) {
				ms[i].Rank = rk
			}
			sort.SliceStable(ms, func(a, b int) bool {
				if ms[a].Rank != ms[b].Rank {
					return ms[a].Rank < ms[b].Rank
				}
				return ms[a].Model < ms[b].Model
			})
			r.Rankings = append(r.Rankings, Ranking{Judge: j, Domain: t.domainName(di), Models: ms})
		}
	}
}

// pairVectors returns the scores of the models both judges scored in one
// domain's column, in model order.
func pairVectors(t *table, col []float64, a, b string) (x, y []float64) {
	at := map[system]int{}
	for i, s := range t.systems {
		at[s] = i
	}
	models := map[string]bool{}
	for _, s := range t.systems {
		models[s.model] = true
	}
	for _, m := range sortedKeys(models) {
		ia, oka := at[system{m, a}]
		ib, okb := at[system{m, b}]
		if !oka || !okb || math.IsNaN(col[ia]) || math.IsNaN(col[ib]) {
			continue
		}
		x, y = append(x, col[ia]), append(y, col[ib])
	}
	return x, y
}

func (r *Report) judgePairs(t *table, o Options) {
	if len(r.Judges) < 2 {
		return
	}
	sc, _ := t.scores(nil)
	type pair struct{ a, b string }
	var pairs []pair
	for i := range r.Judges {
		for j := i + 1; j < len(r.Judges); j++ {
			pairs = append(pairs, pair{r.Judges[i], r.Judges[j]})
		}
	}
	cols := len(sc)
	rho := make([][][]float64, len(pairs))
	tau := make([][][]float64, len(pairs))
	for p := range pairs {
		rho[p], tau[p] = make([][]float64, cols), make([][]float64, cols)
	}
	if o.Resamples > 0 {
		rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
		draw := make([][]int, len(t.domains))
		for b := 0; b < o.Resamples; b++ {
			for d := range t.domains {
				n := len(t.clusters[d])
				if draw[d] == nil {
					draw[d] = make([]int, n)
				}
				clear(draw[d])
				for range n {
					draw[d][rng.IntN(n)]++
				}
			}
			bs, _ := t.scores(draw)
			for p, pr := range pairs {
				for c := range bs {
					x, y := pairVectors(t, bs[c], pr.a, pr.b)
					if len(x) < 3 {
						continue
					}
					rho[p][c] = append(rho[p][c], Spearman(x, y))
					tau[p][c] = append(tau[p][c], KendallTauB(x, y))
				}
			}
		}
	}
	for p, pr := range pairs {
		for c := range sc {
			x, y := pairVectors(t, sc[c], pr.a, pr.b)
			jp := JudgePair{Judges: [2]string{pr.a, pr.b}, Domain: t.domainName(c), Models: len(x),
				Spearman: Num(math.NaN()), Kendall: Num(math.NaN()), SpearmanCI: toCI(percentileCI(nil)), KendallCI: toCI(percentileCI(nil))}
			if len(x) >= 2 {
				jp.Spearman, jp.Kendall = Num(Spearman(x, y)), Num(KendallTauB(x, y))
			}
			if len(x) >= 3 {
				jp.SpearmanCI, jp.KendallCI = toCI(percentileCI(rho[p][c])), toCI(percentileCI(tau[p][c]))
			}
			r.Pairs = append(r.Pairs, jp)
		}
	}
}

func (r *Report) sampleCorrelations(samples []Sample) {
	type pred struct{ model, key string }
	tot := map[string]map[pred]float64{}
	for _, s := range samples {
		if s.Failed || s.Scores.Total() == 0 {
			continue
		}
		if tot[s.Judge] == nil {
			tot[s.Judge] = map[pred]float64{}
		}
		tot[s.Judge][pred{s.Model, s.Key}] = s.Scores.Total()
	}
	for i, a := range r.Judges {
		for _, b := range r.Judges[i+1:] {
			keys := make([]pred, 0, len(tot[a]))
			for k := range tot[a] {
				if _, ok := tot[b][k]; ok {
					keys = append(keys, k)
				}
			}
			sort.Slice(keys, func(i, j int) bool {
				if keys[i].model != keys[j].model {
					return keys[i].model < keys[j].model
				}
				return keys[i].key < keys[j].key
			})
			x, y := make([]float64, len(keys)), make([]float64, len(keys))
			for n, k := range keys {
				x[n], y[n] = tot[a][k], tot[b][k]
			}
			r.Samples = append(r.Samples, SampleCorrelation{Judges: [2]string{a, b}, N: len(keys), Pearson: Num(Pearson(x, y)), Spearman: Num(Spearman(x, y))})
		}
	}
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
