package bench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/taxonomy"
)

// Comparison sets several runs side by side, the first one as baseline.
type Comparison struct {
	Labels []string `json:"labels"`
	// Judges are the judges of each run's rows, in Labels order (see
	// Report.Judges); runs judged differently are not on one scale.
	Judges [][]string `json:"judges"`
	// Prompts are the judge texts of each run (see Report.JudgePrompts);
	// runs judged with different texts are not on one scale either.
	Prompts [][]string `json:"judge_prompts"`
	// Modes are the judge modes of each run ("pointwise", "turing",
	// "reference"); runs of different modes measure different things.
	Modes []string     `json:"judge_modes"`
	Rows  []CompareRow `json:"rows"`
	// Taxonomy holds each run's error taxonomy, in Labels order (nil for
	// a report that has no trust report, e.g. one decoded from JSON).
	Taxonomy []*taxonomy.Counts `json:"taxonomy"`
}

// PromptsDiffer reports runs whose LLM judges were given different texts
// (agentworld's against the official one, or official files with
// different SHA-256): like different judges, their scores are not on one
// scale.
func (c *Comparison) PromptsDiffer() bool { return !allEqual(c.Prompts) }

// allEqual reports whether every run's list equals the first run's.
func allEqual(lists [][]string) bool {
	for _, l := range lists[1:] {
		if !slices.Equal(l, lists[0]) {
			return false
		}
	}
	return true
}

// ModesDiffer reports runs judged in different judge modes: a detection
// rate, a win rate and a rubric score cannot be compared.
func (c *Comparison) ModesDiffer() bool {
	return slices.ContainsFunc(c.Modes, func(m string) bool { return m != c.Modes[0] })
}

// PromptsText names each run's judge texts.
func (c *Comparison) PromptsText() string {
	var parts []string
	for i, l := range c.Labels {
		parts = append(parts, l+": "+strings.Join(c.Prompts[i], " + "))
	}
	return strings.Join(parts, "; ")
}

// JudgesDiffer reports runs scored by different judges (the offline rules
// scorer against an LLM judge, or two LLM judges): their scores are not
// on one scale, so their deltas measure the judges as much as the models.
func (c *Comparison) JudgesDiffer() bool { return !allEqual(c.Judges) }

// judgesText names each run's judges, "label: judge, …" per run.
func (c *Comparison) judgesText() string {
	var parts []string
	for i, l := range c.Labels {
		js := strings.Join(c.Judges[i], "+")
		if js == "" {
			js = "unknown"
		}
		parts = append(parts, l+" judged by "+js)
	}
	return strings.Join(parts, "; ")
}

// CompareRow is one (domain, metric) line: each run's value, its delta
// from the baseline and whether the two 95% intervals are disjoint.
// Domain "overall" holds the headline (metric "domain_mean") and the pooled
// figure (metric "sample_mean", no interval).
type CompareRow struct {
	Domain string `json:"domain"`
	Metric string `json:"metric"`
	Values []Num  `json:"values"`
	// Deltas[i] is Values[i] − Values[0]; Deltas[0] is 0.
	Deltas []Num `json:"deltas"`
	// Separated[i] says that run i's interval and the baseline's do not
	// overlap; false when either interval is unknown.
	Separated []bool `json:"separated"`
}

// Compare builds the domain × dimension comparison of reports (made by
// Score, which fills the per-dimension intervals; reports decoded from JSON
// only carry the total's). Reports without a Label are named run1, run2, …
func Compare(reports ...*Report) *Comparison {
	c := &Comparison{}
	for i, r := range reports {
		l := r.Label
		if l == "" {
			l = fmt.Sprintf("run%d", i+1)
		}
		c.Labels = append(c.Labels, l)
		js := slices.Clone(r.Judges)
		slices.Sort(js)
		c.Judges = append(c.Judges, slices.Compact(js))
		var tx *taxonomy.Counts
		if r.Trust != nil {
			tx = r.Trust.Taxonomy
		}
		c.Taxonomy = append(c.Taxonomy, tx)
		c.Prompts = append(c.Prompts, slices.Clone(r.JudgePrompts))
		c.Modes = append(c.Modes, cmp.Or(r.JudgeMode, ModePointwise))
	}
	if reports[0].Pair != nil {
		c.Rows = comparePairs(reports)
		return c
	}
	metrics := append(append([]string(nil), Dimensions...), "total")
	for _, d := range unionOrder(reports) {
		for mi, m := range metrics {
			vals := make([]Num, len(reports))
			cis := make([][2]Num, len(reports))
			for i, r := range reports {
				nan := Num(math.NaN())
				vals[i], cis[i] = nan, [2]Num{nan, nan}
				ds := r.Domains[d]
				if ds == nil {
					continue
				}
				if mi < 5 {
					vals[i], cis[i] = ds.Dims()[mi], ds.DimCI95[mi]
					if ds.DimCI95 == ([5][2]Num{}) {
						cis[i] = [2]Num{nan, nan}
					}
				} else {
					vals[i], cis[i] = ds.Total, ds.CI95
				}
			}
			c.Rows = append(c.Rows, newRow(d, m, vals, cis))
		}
	}
	mean := make([]Num, len(reports))
	meanCI := make([][2]Num, len(reports))
	pooled := make([]Num, len(reports))
	noCI := make([][2]Num, len(reports))
	for i, r := range reports {
		mean[i], meanCI[i], pooled[i] = r.OverallDomainMean, r.OverallCI95, r.OverallSampleMean
		noCI[i] = [2]Num{Num(math.NaN()), Num(math.NaN())}
		if r.OverallCI95 == ([2]Num{}) {
			meanCI[i] = noCI[i]
		}
	}
	c.Rows = append(c.Rows, newRow("overall", "domain_mean", mean, meanCI), newRow("overall", "sample_mean", pooled, noCI))
	return c
}

func newRow(d, m string, vals []Num, cis [][2]Num) CompareRow {
	row := CompareRow{Domain: d, Metric: m, Values: vals, Deltas: make([]Num, len(vals)), Separated: make([]bool, len(vals))}
	for i := range vals {
		row.Deltas[i] = vals[i] - vals[0]
		if i > 0 {
			row.Separated[i] = separated(cis[0], cis[i])
		}
	}
	return row
}

// separated reports whether two intervals are known and disjoint.
func separated(a, b [2]Num) bool {
	for _, x := range []Num{a[0], a[1], b[0], b[1]} {
		if math.IsNaN(float64(x)) {
			return false
		}
	}
	return a[1] < b[0] || b[1] < a[0]
}

func unionOrder(reports []*Report) []string {
	seen := map[string]bool{}
	var rest []string
	for _, r := range reports {
		for d := range r.Domains {
			seen[d] = true
		}
	}
	var out []string
	for _, d := range domain.All {
		if seen[string(d)] {
			out = append(out, string(d))
			delete(seen, string(d))
		}
	}
	for _, r := range reports {
		for _, d := range domainOrder(r.Domains) {
			if seen[d] {
				rest = append(rest, d)
				delete(seen, d)
			}
		}
	}
	return append(out, rest...)
}

// WriteText renders the comparison: one line per domain and metric, each
// run's value with its delta from the first run; '*' marks a delta whose
// 95% intervals do not overlap. Runs judged by different judges are named
// as such above the table.
func (c *Comparison) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	if c.JudgesDiffer() {
		ew.printf("WARNING: these runs were scored by different judges (%s); their scores are not on one scale\n\n", c.judgesText())
	}
	if len(c.Modes) > 0 && c.Modes[0] != ModePointwise && !c.ModesDiffer() {
		ew.printf("judge mode: %s (rate: %s)\n", c.Modes[0], map[string]string{ModeTuring: "detection %, 50 = indistinguishable", ModeReference: "model closer to the truth than the reference %"}[c.Modes[0]])
	}
	if c.PromptsDiffer() {
		ew.printf("WARNING: these runs' judges were given different texts (%s); their scores are not on one scale\n\n", c.PromptsText())
	} else if len(c.Prompts) > 0 && len(c.Prompts[0]) > 0 {
		ew.printf("judge prompts: %s\n\n", strings.Join(c.Prompts[0], " + "))
	}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "domain\tmetric\t")
	for i, l := range c.Labels {
		if i == 0 {
			fmt.Fprintf(tw, "%s\t", l)
		} else {
			fmt.Fprintf(tw, "%s\tΔ\t", l)
		}
	}
	fmt.Fprintln(tw)
	prev := ""
	for _, r := range c.Rows {
		d := r.Domain
		if d == prev {
			d = ""
		}
		prev = r.Domain
		fmt.Fprintf(tw, "%s\t%s\t", d, r.Metric)
		for i, v := range r.Values {
			if i == 0 {
				fmt.Fprintf(tw, "%s\t", v)
				continue
			}
			mark := ""
			if r.Separated[i] {
				mark = "*"
			}
			fmt.Fprintf(tw, "%s\t%s%s\t", v, signed(r.Deltas[i]), mark)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ew.printf("\nΔ = this run − %s: positive means this run scores higher than %s\n", c.Labels[0], c.Labels[0])
	ew.printf("* = the 95%% intervals (bootstrap over trajectories) of this run and %s do not overlap\n", c.Labels[0])
	c.writeTaxonomy(ew)
	return ew.err
}

func signed(n Num) string {
	if math.IsNaN(float64(n)) {
		return "-"
	}
	return fmt.Sprintf("%+.2f", float64(n))
}

// writeTaxonomy renders the runs' error taxonomies side by side: per
// category, each run's share of its classified samples over all domains,
// and its change from the first run in percentage points.
func (c *Comparison) writeTaxonomy(ew *errWriter) {
	for _, t := range c.Taxonomy {
		if t == nil {
			return
		}
	}
	ew.printf("\nError taxonomy (share of each run's classified samples; Δ in percentage points; per domain, the categories some run has):\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "domain\tcategory\t")
	for i, l := range c.Labels {
		if i == 0 {
			fmt.Fprintf(tw, "%s\t", l)
		} else {
			fmt.Fprintf(tw, "%s\tΔ\t", l)
		}
	}
	fmt.Fprintln(tw)
	// share of domain d ("" for all domains) in cat, and the count.
	share := func(t *taxonomy.Counts, d string, cat taxonomy.Category) (float64, int) {
		n, k := 0, 0
		for dom, v := range t.Classified {
			if d == "" || dom == d {
				n += v
				k += t.ByDomain[dom][cat]
			}
		}
		if n == 0 {
			return math.NaN(), 0
		}
		return 100 * float64(k) / float64(n), k
	}
	doms := []string{""}
	seen := map[string]bool{}
	for _, r := range c.Rows {
		if r.Domain != "overall" && !seen[r.Domain] {
			seen[r.Domain] = true
			doms = append(doms, r.Domain)
		}
	}
	for _, d := range doms {
		name := d
		if d == "" {
			name = "all"
		}
		for _, cat := range taxonomy.All {
			any := d == ""
			for _, t := range c.Taxonomy {
				if _, k := share(t, d, cat); k > 0 {
					any = true
				}
			}
			if !any {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t", name, cat)
			name = ""
			base, _ := share(c.Taxonomy[0], d, cat)
			for i, t := range c.Taxonomy {
				v, _ := share(t, d, cat)
				if i == 0 {
					fmt.Fprintf(tw, "%s\t", pctOrDash(v))
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t", pctOrDash(v), signed(Num(v-base)))
			}
			fmt.Fprintln(tw)
		}
	}
	_ = tw.Flush()
}

func pctOrDash(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", v)
}

// comparePairs builds the rows of pairwise reports: per domain and overall,
// the rate (with intervals), the position bias and the flip rate.
func comparePairs(reports []*Report) []CompareRow {
	doms := map[string]*DomainScore{}
	for _, r := range reports {
		if r.Pair == nil {
			continue
		}
		for d := range r.Pair.Domains {
			doms[d] = nil
		}
	}
	var rows []CompareRow
	nan := Num(math.NaN())
	for _, d := range append(domainOrder(doms), "overall") {
		get := func(r *Report) *PairScore {
			if r.Pair == nil {
				return nil
			}
			if d == "overall" {
				return r.Pair.Overall
			}
			return r.Pair.Domains[d]
		}
		for _, m := range []string{"rate", "position_a", "flip_rate"} {
			vals := make([]Num, len(reports))
			cis := make([][2]Num, len(reports))
			for i, r := range reports {
				vals[i], cis[i] = nan, [2]Num{nan, nan}
				s := get(r)
				if s == nil {
					continue
				}
				switch m {
				case "rate":
					vals[i], cis[i] = s.Rate, s.CI95
				case "position_a":
					vals[i] = s.PositionA
				case "flip_rate":
					vals[i] = s.FlipRate
				}
			}
			rows = append(rows, newRow(d, m, vals, cis))
		}
	}
	return rows
}
