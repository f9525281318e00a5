package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteText renders the report as a table: one line per domain with counts,
// the five dimensions, the total and its 95% interval; then both overall
// figures, labelled, and the failure reasons.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	title := "AgentWorldBench scores"
	if r.Label != "" {
		title += ": " + r.Label
	}
	ew.printf("%s (0-100 = (mean-1)/4*100)\n", title)
	if r.Strict {
		ew.printf("strict: failed samples are scored 1 on every dimension\n")
	} else {
		ew.printf("failed samples are excluded from the means (published convention); see failures below\n")
	}
	if r.RulesOnly() {
		ew.printf("NOTE: scored by the offline rules scorer, not the rubric judge; not comparable with published scores\n")
	}
	ew.printf("\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "domain\tn\tvalid\tfailed\tformat\tfactuality\tconsistency\trealism\tquality\ttotal\t95%% CI\t\n")
	for _, d := range r.Order {
		ds := r.Domains[d]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", d, ds.N, ds.Valid, ds.Failed,
			ds.Format, ds.Factuality, ds.Consistency, ds.Realism, ds.Quality, ds.Total, ciText(ds.CI95))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ew.printf("\nOverall (mean of domain scores, leaderboard headline): %s  95%% CI %s\n", r.OverallDomainMean, ciText(r.OverallCI95))
	ew.printf("Overall (all samples pooled, the published script's figure): %s\n", r.OverallSampleMean)
	if r.Resamples > 0 {
		ew.printf("CIs: bootstrap over trajectories ((task, id) clusters), %d resamples, seed %d\n", r.Resamples, r.Seed)
	}
	if len(r.Failures) > 0 {
		ew.printf("\nFailures:\n")
		for _, d := range r.Order {
			f := r.Failures[d]
			if len(f) == 0 {
				continue
			}
			ew.printf("  %s: %s\n", d, reasonsText(f))
		}
	}
	return ew.err
}

func ciText(ci [2]Num) string {
	if ci[0].String() == "-" {
		return "-"
	}
	return "[" + ci[0].String() + ", " + ci[1].String() + "]"
}

// reasonsText lists failure reasons, most frequent first.
func reasonsText(f map[string]int) string {
	reasons := make([]string, 0, len(f))
	for k := range f {
		reasons = append(reasons, k)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if f[reasons[i]] != f[reasons[j]] {
			return f[reasons[i]] > f[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, len(reasons))
	for i, k := range reasons {
		parts[i] = fmt.Sprintf("%s %d", k, f[k])
	}
	return strings.Join(parts, ", ")
}

// errWriter keeps the first write error so renderers can write freely and
// check once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
