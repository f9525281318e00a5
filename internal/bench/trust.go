package bench

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/agentworld/agentworld/internal/agree"
	"github.com/agentworld/agentworld/internal/taxonomy"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Trust is the trust report of a run: what can be said about how far its
// scores can be trusted from the run alone (parse failures of the judge, a
// judge of the judged model's own family, the error taxonomy), with the
// figures that need more than one run or human labels named as gaps.
type Trust struct {
	Agree    *agree.Report
	Taxonomy *taxonomy.Counts
}

// AgreeSamples converts judged rows to the samples agreement works on.
func AgreeSamples(rows []*Judged) []agree.Sample {
	out := make([]agree.Sample, len(rows))
	for i, j := range rows {
		s := agree.Sample{Key: j.Sample, Cluster: j.Task + "\x00" + j.ID, Domain: DomainOf(j), Model: j.Model, Judge: j.Judge,
			Failed: !j.Valid(), JudgeUnparsable: j.Failure == FailJudgeUnparsable}
		if j.Scores != nil {
			s.Scores = *j.Scores
		}
		s.TuringPick = turingPick(j)
		if j.JudgeMode == ModeTuring && s.TuringPick == "" && j.Failure == FailJudgeUnparsable {
			s.JudgeUnparsable = true
		}
		out[i] = s
	}
	return out
}

// turingPick is what a Turing-mode judge took for the real observation
// (agree.PickTruth or agree.PickPrediction), from its first answered
// order; "" for a row of another mode or with no answer.
func turingPick(j *Judged) string {
	if j.JudgeMode != ModeTuring || j.Pair == nil {
		return ""
	}
	for _, pj := range j.Pair.Judgments {
		if pj.Answer == "" {
			continue
		}
		if pj.Hit() {
			return agree.PickTruth
		}
		return agree.PickPrediction
	}
	return ""
}

// TaxonomyInput is what the error taxonomy reads of a judged row; rec,
// when known, adds the real observation and the action.
func TaxonomyInput(j *Judged, rec *trajectory.Record) taxonomy.Input {
	in := taxonomy.Input{Prediction: j.Prediction.Prediction, Scores: j.Scores, Weaknesses: j.Weaknesses,
		Truncated: j.Truncated, FinishReason: j.FinishReason}
	if rec != nil && rec.Validate() == nil {
		in.Truth = rec.GroundTruth()
		in.Action = rec.CurrentPrompt
		if in.Action == "" {
			in.Action = rec.Prompt[rec.TurnIdx-1]
		}
	}
	return in
}

// Classifiable reports whether a row's prediction was judged, or cut by
// its budget: the rows the taxonomy counts. A sample with no generation or
// a judge that never answered parsably has nothing to classify.
func Classifiable(j *Judged) bool {
	return j.Valid() || j.Failure == FailLength || j.Truncated
}

// ClassifyRows counts the error taxonomy of judged rows from what the rows
// carry (prediction, flags, scores, weaknesses; records are not read).
func ClassifyRows(rows []*Judged) *taxonomy.Counts {
	c := taxonomy.NewCounts()
	for _, j := range rows {
		if Classifiable(j) {
			c.Add(DomainOf(j), j.Sample, taxonomy.Classify(TaxonomyInput(j, nil)))
		}
	}
	return c
}

// TrustOf is the trust report of one run's rows.
func TrustOf(rows []*Judged) *Trust {
	return &Trust{Agree: agree.Analyze(AgreeSamples(rows), nil, &agree.Options{Resamples: -1}), Taxonomy: ClassifyRows(rows)}
}

// AgreeRuns reads the judged rows of runs (each a run directory or judged
// file, typically the same data under several models and judges) and
// analyzes the agreement of their judges, and with labels.
func AgreeRuns(runs []string, labels []agree.Label, opts *agree.Options) (*agree.Report, error) {
	var samples []agree.Sample
	type system struct{ model, judge string }
	first := map[system]string{}
	var warnings []string
	for _, r := range runs {
		rows, err := ReadJudged(JudgedPathOf(r))
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", r, err)
		}
		s := AgreeSamples(rows)
		seen := map[system]bool{}
		for _, x := range s {
			k := system{x.Model, x.Judge}
			if seen[k] {
				continue
			}
			seen[k] = true
			if f, ok := first[k]; ok {
				warnings = append(warnings, fmt.Sprintf("runs %s and %s both hold model %s under judge %s: their samples are pooled as one", f, r, k.model, k.judge))
			} else {
				first[k] = r
			}
		}
		samples = append(samples, s...)
	}
	rep := agree.Analyze(samples, labels, opts)
	rep.Warnings = append(warnings, rep.Warnings...)
	return rep, nil
}

// writeTrustText renders the trust section of a run's text report.
func writeTrustText(ew *errWriter, t *Trust, order []string) {
	ew.printf("\nTrust report:\n")
	for _, w := range t.Agree.Warnings {
		ew.printf("  WARNING: %s\n", w)
	}
	for _, p := range t.Agree.ParseFailures {
		if p.Judged == 0 {
			continue
		}
		ew.printf("  judge %s: %d of %d answers never parsed (%.1f%%)\n", p.Judge, p.Unparsable, p.Judged, 100*float64(p.Rate))
	}
	writeTaxonomyText(ew, t.Taxonomy, order)
	for _, g := range t.Agree.Gaps {
		ew.printf("  not available: %s\n", g)
	}
}

// writeTaxonomyText renders the error taxonomy as a domain × category
// table of sample counts.
func writeTaxonomyText(w io.Writer, c *taxonomy.Counts, order []string) {
	if c == nil || len(c.Classified) == 0 {
		fmt.Fprintf(w, "  error taxonomy: no judged sample to classify\n")
		return
	}
	fmt.Fprintf(w, "  error taxonomy (samples per category; one sample can be in several):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  domain\tclassified\tclean\t")
	for _, cat := range taxonomy.All {
		fmt.Fprintf(tw, "%s\t", cat)
	}
	fmt.Fprintln(tw)
	for _, d := range order {
		if _, ok := c.Classified[d]; !ok {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t", d, c.Classified[d], c.Clean[d])
		for _, cat := range taxonomy.All {
			fmt.Fprintf(tw, "%d\t", c.ByDomain[d][cat])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
