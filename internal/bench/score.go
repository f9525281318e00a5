package bench

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Bootstrap defaults: 1000 resamples of trajectories (clusters) with a fixed
// seed, so the same judged file always prints the same intervals.
const (
	DefaultResamples = 1000
	DefaultSeed      = 20260501
)

// FailUnscored is the failure reason of a row that has neither a failure nor
// scores (a judged file cut short by hand, an older writer).
const FailUnscored = "unscored"

// ScoreOptions tunes Score; nil means the published conventions.
type ScoreOptions struct {
	// Strict scores failed samples as the lowest score (1 on every
	// dimension) instead of excluding them. Zero: excluded, as published.
	Strict bool
	// Resamples is the number of bootstrap resamples for the 95% intervals.
	// Zero: DefaultResamples; negative: no intervals (NaN).
	Resamples int
	// Seed seeds the bootstrap. Zero: DefaultSeed.
	Seed uint64
	// Label names the run in comparisons and reports. Zero: "".
	Label string
}

// Num is a score on the 0–100 scale; NaN (no sample to average) is written
// as JSON null.
type Num float64

// MarshalJSON writes NaN and infinities as null.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// Interval is a 95% confidence interval of scores; its JSON is
// [low, high] or null (see [score.Interval]).
type Interval = score.Interval[Num]

// UnmarshalJSON reads a number or null (NaN).
func (n *Num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Num(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// DomainScore is one domain's line of the report. Dimension and total
// values are normalized means, (x−1)/4×100.
type DomainScore struct {
	N           int      `json:"n"`
	Valid       int      `json:"valid"`
	Failed      int      `json:"failed"`
	Format      Num      `json:"format"`
	Factuality  Num      `json:"factuality"`
	Consistency Num      `json:"consistency"`
	Realism     Num      `json:"realism"`
	Quality     Num      `json:"quality"`
	Total       Num      `json:"total"`
	CI95        Interval `json:"ci95"`

	// DimCI95 holds the 95% intervals of the five dimensions, in Dimensions
	// order; only Score fills it (it is not part of the JSON).
	DimCI95 [5][2]Num `json:"-"`
	// Clusters is the number of distinct trajectories among the counted
	// samples.
	Clusters int `json:"-"`
}

// Dims returns the five dimension scores in Dimensions order.
func (d *DomainScore) Dims() [5]Num {
	return [5]Num{d.Format, d.Factuality, d.Consistency, d.Realism, d.Quality}
}

// Report is the score of one judged run. Its JSON form is the documented
// `bench score --json` object; the fields tagged "-" only feed the text and
// HTML renderers and Compare.
type Report struct {
	Domains map[string]*DomainScore `json:"domains"`
	// OverallDomainMean is the headline: the unweighted mean of the domain
	// totals (the leaderboard's Overall).
	OverallDomainMean Num `json:"overall_domain_mean"`
	// OverallSampleMean pools every counted sample regardless of domain:
	// the figure the published script prints.
	OverallSampleMean Num `json:"overall_sample_mean"`
	// Failures counts failed samples per domain and reason.
	Failures map[string]map[string]int `json:"failures"`
	// JudgePrompts lists the judge texts of the LLM-judged rows (see
	// Judged.JudgePrompts), sorted: one entry for a run judged alike,
	// "agentworld (not the official text)" unless the official text was
	// given. PromptFiles are the official files and their SHA-256, from
	// the run's run.json; PromptsUnpinned those that differ from the
	// official commit's.
	JudgePrompts []string `json:"judge_prompts"`
	// JudgeMode is the pairwise mode of the rows ("turing", "reference");
	// empty for pointwise. Pair is then the report, and Domains is empty.
	JudgeMode       string             `json:"judge_mode,omitempty"`
	Pair            *PairReport        `json:"pair,omitempty"`
	PromptFiles     []score.PromptFile `json:"judge_prompt_files,omitempty"`
	PromptsUnpinned []string           `json:"judge_prompts_unpinned,omitempty"`

	Label       string   `json:"-"`
	Order       []string `json:"-"` // domains in leaderboard order, unknown ones after, sorted
	Strict      bool     `json:"-"`
	Resamples   int      `json:"-"`
	Seed        uint64   `json:"-"`
	OverallCI95 [2]Num   `json:"-"` // interval of OverallDomainMean
	Judges      []string `json:"-"` // distinct judge names of the rows
	// Trust is the run's trust report (parse failures, family warnings,
	// error taxonomy, the gaps); Score always fills it.
	Trust *Trust `json:"-"`
}

// ValidSamples counts the samples that were predicted and judged without
// failure: the ones the means stand on (under Strict, the only ones that
// can score above the floor).
func (r *Report) ValidSamples() int {
	n := 0
	for _, d := range r.Domains {
		n += d.Valid
	}
	return n
}

// RulesOnly reports whether any row was scored by the offline rules scorer
// instead of an LLM judge.
func (r *Report) RulesOnly() bool {
	for _, j := range r.Judges {
		if j == "rules" {
			return true
		}
	}
	return false
}

// ReadJudged loads a judged.jsonl file. A malformed line is an error naming
// file:line. When a sample appears more than once (an append-only file
// written across resumed runs), the last row wins, at the first row's place.
func ReadJudged(path string) ([]*Judged, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lr := trajectory.NewLineReader(f, path, 0)
	var rows []*Judged
	at := map[string]int{}
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		j := new(Judged)
		if err := json.Unmarshal(line, j); err != nil {
			return nil, &trajectory.LineError{File: path, Line: n, Err: err}
		}
		if j.Sample != "" {
			if i, ok := at[j.Sample]; ok {
				rows[i] = j
				continue
			}
			at[j.Sample] = len(rows)
		}
		rows = append(rows, j)
	}
}

// DomainOf is the domain a judged row is scored under: its Domain field, or
// the last part of its task.
func DomainOf(j *Judged) string {
	if j.Domain != "" {
		return j.Domain
	}
	return string(domain.FromTask(j.Task))
}

// Normalize maps a 1..5 mean onto 0..100: (x−1)/4×100.
func Normalize(x float64) float64 { return (x - 1) / 4 * 100 }

// sums accumulates the published means: per dimension and for the total,
// the sum and count of non-zero values.
type sums struct {
	dim    [5]float64
	dimN   [5]int
	total  float64
	totalN int
}

func (s *sums) addScores(sc Scores) {
	for i, v := range sc.Values() {
		if v != 0 {
			s.dim[i] += float64(v)
			s.dimN[i]++
		}
	}
	if t := sc.Total(); t != 0 {
		s.total += t
		s.totalN++
	}
}

func (s *sums) add(o *sums) {
	for i := range s.dim {
		s.dim[i] += o.dim[i]
		s.dimN[i] += o.dimN[i]
	}
	s.total += o.total
	s.totalN += o.totalN
}

func meanNorm(sum float64, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return Normalize(sum / float64(n))
}

func (s *sums) totalScore() float64 { return meanNorm(s.total, s.totalN) }

// Score computes the report of a judged run.
//
// Per domain, over the counted samples (valid ones; with Strict, failed
// ones too, scored 1 on every dimension), each dimension is the mean of its
// non-zero values and the total is the mean of the non-zero per-sample
// totals (a sample's total is the mean of its dimensions above 0); both are
// normalized (x−1)/4×100. The headline is the unweighted mean of the domain
// totals (domains without a counted sample are left out); the pooled figure
// is the mean of all non-zero per-sample totals across domains, normalized.
//
// 95% intervals come from a bootstrap clustered by trajectory: rows sharing
// (task, id) are one cluster, clusters are resampled with replacement within
// each domain, and the 2.5th and 97.5th percentiles (linear interpolation)
// of the resampled statistics are reported.
func Score(rows []*Judged, opts *ScoreOptions) *Report {
	var o ScoreOptions
	if opts != nil {
		o = *opts
	}
	if o.Resamples == 0 {
		o.Resamples = DefaultResamples
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	r := &Report{
		Domains:   map[string]*DomainScore{},
		Failures:  map[string]map[string]int{},
		Label:     o.Label,
		Strict:    o.Strict,
		Resamples: max(o.Resamples, 0),
		Seed:      o.Seed,
	}
	lowest := Scores{Format: 1, Factuality: 1, Consistency: 1, Realism: 1, Quality: 1}
	// clusters[domain][key] accumulates the counted rows of one trajectory.
	clusters := map[string]map[string]*sums{}
	judges := map[string]bool{}
	prompts := map[string]bool{}
	mode := ""
	for _, j := range rows {
		if j.JudgeMode != "" && j.JudgeMode != ModePointwise {
			mode = j.JudgeMode
			break
		}
	}
	var pooled sums
	for _, j := range rows {
		d := DomainOf(j)
		ds := r.Domains[d]
		if ds == nil {
			ds = &DomainScore{}
			r.Domains[d] = ds
			clusters[d] = map[string]*sums{}
		}
		ds.N++
		if j.Judge != "" {
			judges[j.Judge] = true
		}
		switch {
		case j.JudgePrompts != "":
			prompts[j.JudgePrompts] = true
		case j.Judge != RulesJudgeName && j.Scores != nil:
			prompts[score.OwnPromptsLabel] = true // an older row: our text
		}
		if mode != "" {
			if !j.pairValid() {
				if r.Failures[d] == nil {
					r.Failures[d] = map[string]int{}
				}
				r.Failures[d][cmp.Or(j.Failure, FailUnscored)]++
			}
			continue
		}
		sc := Scores{}
		if j.Valid() {
			ds.Valid++
			sc = *j.Scores
		} else {
			ds.Failed++
			reason := j.Failure
			if reason == "" {
				reason = FailUnscored
			}
			if r.Failures[d] == nil {
				r.Failures[d] = map[string]int{}
			}
			r.Failures[d][reason]++
			if !o.Strict {
				continue
			}
			sc = lowest
		}
		key := j.Task + "\x00" + j.ID
		c := clusters[d][key]
		if c == nil {
			c = &sums{}
			clusters[d][key] = c
		}
		c.addScores(sc)
		pooled.addScores(sc)
	}
	r.Order = domainOrder(r.Domains)
	for j := range judges {
		r.Judges = append(r.Judges, j)
	}
	sort.Strings(r.Judges)
	r.JudgePrompts = []string{}
	for p := range prompts {
		r.JudgePrompts = append(r.JudgePrompts, p)
	}
	sort.Strings(r.JudgePrompts)
	if mode != "" {
		// A pairwise run: the rows have no dimension scores, so the
		// pointwise tables would only count them as failed.
		r.JudgeMode = mode
		r.Pair = scorePairs(rows, mode, o.Strict, r.Resamples, o.Seed)
		r.Domains, r.Order = map[string]*DomainScore{}, nil
		r.OverallDomainMean, r.OverallSampleMean = Num(math.NaN()), Num(math.NaN())
		r.OverallCI95 = [2]Num{Num(math.NaN()), Num(math.NaN())}
		return r
	}

	// Point estimates.
	domainSums := make([]*sums, len(r.Order))
	for i, d := range r.Order {
		var s sums
		// Sorted, not map order: float sums depend on order, and the same
		// rows must always print the same digits.
		keys := make([]string, 0, len(clusters[d]))
		for k := range clusters[d] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			s.add(clusters[d][k])
		}
		domainSums[i] = &s
		ds := r.Domains[d]
		ds.Clusters = len(clusters[d])
		ds.Format = Num(meanNorm(s.dim[0], s.dimN[0]))
		ds.Factuality = Num(meanNorm(s.dim[1], s.dimN[1]))
		ds.Consistency = Num(meanNorm(s.dim[2], s.dimN[2]))
		ds.Realism = Num(meanNorm(s.dim[3], s.dimN[3]))
		ds.Quality = Num(meanNorm(s.dim[4], s.dimN[4]))
		ds.Total = Num(s.totalScore())
	}
	r.OverallDomainMean = Num(domainMean(domainSums))
	r.OverallSampleMean = Num(pooled.totalScore())

	r.bootstrap(clusters, o.Seed)
	r.Trust = TrustOf(rows)
	return r
}

// domainMean is the unweighted mean of the domain totals that exist.
func domainMean(ds []*sums) float64 {
	sum, n := 0.0, 0
	for _, s := range ds {
		if t := s.totalScore(); !math.IsNaN(t) {
			sum += t
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

func domainOrder(m map[string]*DomainScore) []string {
	var out []string
	for _, d := range domain.All {
		if _, ok := m[string(d)]; ok {
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

// bootstrap fills the 95% intervals by resampling trajectories within each
// domain. A domain with a single trajectory gets no interval (resampling one
// cluster always draws the same rows, a zero-width interval that claims a
// certainty the data does not have), and then neither does the overall
// score, whose spread would leave that domain's uncertainty out.
func (r *Report) bootstrap(clusters map[string]map[string]*sums, seed uint64) {
	nan := Num(math.NaN())
	r.OverallCI95 = [2]Num{nan, nan}
	for _, ds := range r.Domains {
		ds.CI95 = [2]Num{nan, nan}
		for i := range ds.DimCI95 {
			ds.DimCI95[i] = [2]Num{nan, nan}
		}
	}
	B := r.Resamples
	if B <= 0 {
		return
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// Clusters in a fixed order so the seed alone decides the draw.
	lists := make([][]*sums, len(r.Order))
	for i, d := range r.Order {
		keys := make([]string, 0, len(clusters[d]))
		for k := range clusters[d] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lists[i] = append(lists[i], clusters[d][k])
		}
	}
	totals := make([][]float64, len(r.Order))
	dims := make([][5][]float64, len(r.Order))
	var overall []float64
	overallKnown := true
	for _, list := range lists {
		if len(list) == 1 {
			overallKnown = false
		}
	}
	res := make([]*sums, len(r.Order))
	for b := 0; b < B; b++ {
		for i, list := range lists {
			var s sums
			for range list {
				s.add(list[rng.IntN(len(list))])
			}
			res[i] = &s
			if len(list) < 2 {
				continue
			}
			totals[i] = append(totals[i], s.totalScore())
			for k := range 5 {
				dims[i][k] = append(dims[i][k], meanNorm(s.dim[k], s.dimN[k]))
			}
		}
		if overallKnown {
			overall = append(overall, domainMean(res))
		}
	}
	for i, d := range r.Order {
		ds := r.Domains[d]
		ds.CI95 = interval(totals[i])
		for k := range 5 {
			ds.DimCI95[k] = interval(dims[i][k])
		}
	}
	r.OverallCI95 = interval(overall)
}

// interval returns the 2.5th and 97.5th percentiles of xs (NaN values
// dropped), interpolating linearly between order statistics.
func interval(xs []float64) [2]Num {
	v := xs[:0:0]
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return [2]Num{Num(math.NaN()), Num(math.NaN())}
	}
	sort.Float64s(v)
	return [2]Num{Num(percentile(v, 2.5)), Num(percentile(v, 97.5))}
}

func percentile(sorted []float64, p float64) float64 {
	pos := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(sorted)-1)
	frac := pos - float64(lo)
	return sorted[lo] + frac*(sorted[hi]-sorted[lo])
}

// String renders a score with two decimals, "-" for NaN.
func (n Num) String() string {
	if math.IsNaN(float64(n)) {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(n))
}
