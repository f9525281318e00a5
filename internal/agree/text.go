package agree

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText renders the report: warnings first, then the rankings, the
// agreement between judges, per-sample correlations, parse failures, the
// agreement with people and the gaps.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, s := range r.Warnings {
		fmt.Fprintf(&b, "WARNING: %s\n", s)
	}
	if len(r.Warnings) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%d model(s), %d judge(s), %d domain(s)\n", len(r.Models), len(r.Judges), len(r.Domains))
	if len(r.Rankings) > 0 {
		b.WriteString("\nRankings (score 0-100, rank 1 best):\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  domain\tjudge\tranking")
		for _, rk := range r.Rankings {
			parts := make([]string, len(rk.Models))
			for i, m := range rk.Models {
				parts[i] = fmt.Sprintf("%g. %s %s", m.Rank, m.Model, fmt.Sprintf("%.2f", float64(m.Score)))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", rk.Domain, rk.Judge, strings.Join(parts, ", "))
		}
		tw.Flush()
	}
	if len(r.Pairs) > 0 {
		b.WriteString("\nAgreement of rankings between judges (95% CI: bootstrap over trajectories):\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  domain\tjudges\tmodels\tSpearman ρ\t95% CI\tKendall τ-b\t95% CI")
		for _, p := range r.Pairs {
			fmt.Fprintf(tw, "  %s\t%s vs %s\t%d\t%s\t%s\t%s\t%s\n", p.Domain, p.Judges[0], p.Judges[1], p.Models, p.Spearman, p.SpearmanCI, p.Kendall, p.KendallCI)
		}
		tw.Flush()
	}
	if len(r.Samples) > 0 {
		b.WriteString("\nPer-sample agreement of totals (same model, same sample):\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  judges\tsamples\tPearson r\tSpearman ρ")
		for _, s := range r.Samples {
			fmt.Fprintf(tw, "  %s vs %s\t%d\t%s\t%s\n", s.Judges[0], s.Judges[1], s.N, s.Pearson, s.Spearman)
		}
		tw.Flush()
	}
	if len(r.ParseFailures) > 0 {
		b.WriteString("\nJudge answers that never parsed:\n")
		for _, p := range r.ParseFailures {
			rate := "-"
			if p.Judged > 0 {
				rate = fmt.Sprintf("%.1f%%", 100*float64(p.Rate))
			}
			fmt.Fprintf(&b, "  %s: %d of %d judged (%s)\n", p.Judge, p.Unparsable, p.Judged, rate)
		}
	}
	if len(r.Human) > 0 {
		fmt.Fprintf(&b, "\nAgreement with people (%d label(s); κ quadratic-weighted Cohen's kappa, α Krippendorff's alpha at the interval level; 95%% CI: bootstrap over labelled samples):\n", r.Labels)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  judge\tdimension\tpairs\tκ\t95% CI\tα\t95% CI")
		for _, h := range r.Human {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\n", h.Judge, h.Dimension, h.N, h.Kappa, h.KappaCI, h.Alpha, h.AlphaCI)
		}
		tw.Flush()
	}
	if len(r.Turing) > 0 {
		b.WriteString("\nTuring picks by people (share that took the prediction for the real observation; 0.5 = indistinguishable):\n")
		for _, t := range r.Turing {
			fmt.Fprintf(&b, "  %s: %s of %d picks, 95%% CI %s\n", t.Model, t.Fooled, t.Picks, t.FooledCI)
		}
	}
	if len(r.Gaps) > 0 {
		b.WriteString("\nNot available:\n")
		for _, g := range r.Gaps {
			fmt.Fprintf(&b, "  - %s\n", g)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
