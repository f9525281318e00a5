package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	template "github.com/DataDog/datadog-agent/pkg/template/html"

	"github.com/agentworld/agentworld/internal/agree"
	"github.com/agentworld/agentworld/internal/chart"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/taxonomy"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// WriteText renders the report as a table: one line per domain with counts,
// the five dimensions, the total and its 95% interval; then both overall
// figures, labelled, and the failure reasons.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	if r.Pair != nil {
		return r.writePairText(ew)
	}
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
	r.writePrompts(ew)
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
	if r.Trust != nil {
		writeTrustText(ew, r.Trust, r.Order)
	}
	return ew.err
}

// writePairText renders the report of a pairwise run.
func (r *Report) writePairText(ew *errWriter) error {
	if err := r.Pair.writeText(ew, r.Label); err != nil {
		return err
	}
	if r.Strict {
		ew.printf("strict: each failed sample counts against the world model (turing: detected; reference: not closer)\n")
	} else {
		ew.printf("failed samples are left out of the rates; see failures below\n")
	}
	r.writePrompts(ew)
	if len(r.Failures) > 0 {
		ew.printf("\nFailures:\n")
		for _, d := range domainOrderPairs(r.Pair.Domains) {
			if f := r.Failures[d]; len(f) > 0 {
				ew.printf("  %s: %s\n", d, reasonsText(f))
			}
		}
	}
	return ew.err
}

// writePrompts says which judge text the rows were judged with, the
// official files' SHA-256 and a warning for files that differ from the
// pinned commit's.
func (r *Report) writePrompts(ew *errWriter) {
	for _, p := range r.JudgePrompts {
		ew.printf("judge prompts: %s\n", p)
	}
	if len(r.JudgePrompts) > 1 {
		ew.printf("WARNING: rows judged with different judge texts are not on one scale\n")
	}
	for _, f := range r.PromptFiles {
		ew.printf("  sha256 %s  %s\n", f.SHA256, f.Path)
	}
	if len(r.PromptsUnpinned) > 0 {
		ew.printf("WARNING: %d judge prompt files differ from the official commit's (%s): not the published text\n", len(r.PromptsUnpinned), strings.Join(r.PromptsUnpinned, ", "))
	}
	for _, p := range r.JudgePrompts {
		if p == score.OwnPromptsLabel {
			ew.printf("  (scores judged with agentworld's text are not comparable with the published table; --prompts DIR judges with the official text)\n")
		}
	}
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

// HTMLOptions tunes WriteHTML; nil means defaults.
type HTMLOptions struct {
	// Worst is how many of the lowest-scoring valid samples to show. Zero:
	// 20; negative: none.
	Worst int
	// Records maps Judged.Sample to its input record, used for the context
	// and ground truth of the worst samples. Zero: records are read from
	// DataDir.
	Records map[string]*trajectory.Record
	// DataDir is the data dir the run read; a shown sample missing from
	// Records is loaded from the file named by its File field (base name
	// under DataDir) at its Line. Zero: File is used as a path as is.
	DataDir string
	// Excerpt caps each shown text (context, prediction, ground truth) in
	// bytes. Zero: 4000.
	Excerpt int
}

// WriteHTML writes one self-contained HTML page for a run: the score table
// with both overall figures, a per-domain bar chart with 95% intervals
// (rendered with gonum/plot, embedded as a base64 PNG), the failure counts,
// and the worst valid samples with context, prediction against ground truth
// and the judge's weaknesses. Records are only read for the samples shown.
func WriteHTML(r *Report, rows []*Judged, w io.Writer, opts *HTMLOptions) error {
	var o HTMLOptions
	if opts != nil {
		o = *opts
	}
	if o.Worst == 0 {
		o.Worst = 20
	}
	if o.Excerpt <= 0 {
		o.Excerpt = 4000
	}
	chart, err := barChartSVG(r)
	if err != nil {
		return fmt.Errorf("render chart: %w", err)
	}
	worst := worstRows(rows, o.Worst)
	recs := o.Records
	var missing []*Judged
	for _, j := range worst {
		if recs[j.Sample] == nil {
			missing = append(missing, j)
		}
	}
	if len(missing) > 0 {
		loaded, err := LoadRecords(o.DataDir, missing)
		if err != nil {
			return err
		}
		merged := make(map[string]*trajectory.Record, len(recs)+len(loaded))
		for k, v := range recs {
			merged[k] = v
		}
		for k, v := range loaded {
			merged[k] = v
		}
		recs = merged
	}
	page := htmlPage{
		Title:     "AgentWorldBench report",
		Label:     r.Label,
		Report:    r,
		Chart:     chart,
		Trust:     r.Trust,
		RulesOnly: r.RulesOnly(),
	}
	if pr := r.Pair; pr != nil {
		page.Pair = &htmlPair{Title: pr.Title(), Meaning: pr.Meaning(), RateLabel: pr.RateLabel(),
			BothOrders: pr.BothOrders, Rows: pr.Rows(), DomainMean: pr.DomainMean}
	}
	if r.Trust != nil {
		page.Categories = taxonomy.All
		page.Taxonomy = taxonomyRows(r.Trust.Taxonomy, r.Order)
	}
	for _, d := range r.Order {
		page.Domains = append(page.Domains, htmlDomain{Name: d, S: r.Domains[d], Failures: reasonsText(r.Failures[d])})
	}
	for _, j := range worst {
		s := htmlSample{J: j, Total: fmt.Sprintf("%.2f", j.Scores.Total()), Prediction: excerpt(j.Prediction.Prediction, o.Excerpt)}
		if rec := recs[j.Sample]; rec != nil && rec.Validate() == nil {
			s.Context = excerpt(contextOf(rec), o.Excerpt)
			s.Truth = excerpt(rec.GroundTruth(), o.Excerpt)
		} else {
			s.Truth = "(record not available)"
		}
		page.Worst = append(page.Worst, s)
	}
	return reportTemplate.Execute(w, page)
}

// LoadRecords reads the input records of rows by their File and Line,
// streaming each file once and decoding only the wanted lines. dataDir, when
// set, is the run's data: a directory holding the files, or the one data
// file itself (rows from other files then have no record).
func LoadRecords(dataDir string, rows []*Judged) (map[string]*trajectory.Record, error) {
	single := ""
	if st, err := os.Stat(dataDir); err == nil && st.Mode().IsRegular() {
		single = dataDir
	}
	want := map[string]map[int][]string{} // path → line → samples
	for _, j := range rows {
		if j.File == "" || j.Line <= 0 {
			continue
		}
		p := j.File
		switch {
		case single != "":
			if filepath.Base(single) != filepath.Base(j.File) {
				continue
			}
			p = single
		case dataDir != "":
			p = filepath.Join(dataDir, filepath.Base(j.File))
		}
		if want[p] == nil {
			want[p] = map[int][]string{}
		}
		want[p][j.Line] = append(want[p][j.Line], j.Sample)
	}
	out := map[string]*trajectory.Record{}
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := loadLines(p, want[p], out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func loadLines(path string, lines map[int][]string, out map[string]*trajectory.Record) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	lr := trajectory.NewLineReader(f, path, 0)
	left := len(lines)
	for left > 0 {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		samples, ok := lines[n]
		if !ok {
			continue
		}
		rec := new(trajectory.Record)
		if err := json.Unmarshal(line, rec); err != nil {
			return &trajectory.LineError{File: path, Line: n, Err: err}
		}
		for _, s := range samples {
			out[s] = rec
		}
		left--
	}
	return nil
}

// worstRows returns the n valid rows with the lowest totals (ties broken by
// domain then sample, so the page is stable).
func worstRows(rows []*Judged, n int) []*Judged {
	if n <= 0 {
		return nil
	}
	var valid []*Judged
	for _, j := range rows {
		if j.Valid() {
			valid = append(valid, j)
		}
	}
	sort.SliceStable(valid, func(a, b int) bool {
		ta, tb := valid[a].Scores.Total(), valid[b].Scores.Total()
		if ta != tb {
			return ta < tb
		}
		if DomainOf(valid[a]) != DomainOf(valid[b]) {
			return DomainOf(valid[a]) < DomainOf(valid[b])
		}
		return valid[a].Sample < valid[b].Sample
	})
	return valid[:min(n, len(valid))]
}

// contextOf is the end of the history a judge saw: the previous turn and
// the current action.
func contextOf(rec *trajectory.Record) string {
	var b strings.Builder
	if i := rec.TurnIdx - 2; i >= 0 {
		fmt.Fprintf(&b, "… %d earlier turn(s)\n\n%s\n%s\n\n", rec.TurnIdx-1, rec.Prompt[i], rec.Response[i])
	}
	cur := rec.CurrentPrompt
	if cur == "" {
		cur = rec.Prompt[rec.TurnIdx-1]
	}
	b.WriteString(cur)
	return b.String()
}

// excerpt keeps the first n bytes of s (on a rune boundary) and says how
// much was cut.
func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… (%d more bytes)", len(s)-cut)
}

// barChartSVG draws the domain totals with their 95% intervals and the
// overall domain mean, as an SVG element for inlining in the page (its
// text is drawn in the page's font).
func barChartSVG(r *Report) (template.HTML, error) {
	b := &chart.Bars{Title: "AgentWorldBench score by domain (0-100)", YLabel: "score", YMax: 100}
	for _, d := range r.Order {
		ds := r.Domains[d]
		v := float64(ds.Total)
		if math.IsNaN(v) {
			v = 0
		}
		lo, hi := float64(ds.CI95[0]), float64(ds.CI95[1])
		if math.IsNaN(lo) || math.IsNaN(hi) {
			lo, hi = v, v
		}
		b.Labels, b.Values = append(b.Labels, d), append(b.Values, v)
		b.Lo, b.Hi = append(b.Lo, lo), append(b.Hi, hi)
	}
	if len(b.Labels) == 0 {
		b.Labels, b.Values = []string{"(no samples)"}, []float64{0}
	}
	if mean := float64(r.OverallDomainMean); !math.IsNaN(mean) {
		b.Ref = &chart.Ref{Value: mean, Label: fmt.Sprintf("overall (domain mean) %.2f", mean), Color: color.RGBA{R: 0xc0, G: 0x39, B: 0x2b, A: 0xff}}
	}
	page := chart.Page{Width: max(480, 140+90*len(b.Labels)), Height: 400, Panels: []chart.Panel{b}}
	var buf bytes.Buffer
	if err := page.WriteSVG(&buf); err != nil {
		return "", err
	}
	// Inlined without its XML declaration. The markup is ours and every
	// label in it is XML-escaped, so it is safe to mark as HTML.
	svg := buf.String()
	return template.HTML(svg[strings.Index(svg, "<svg"):]), nil
}

type htmlDomain struct {
	Name     string
	S        *DomainScore
	Failures string
}

type htmlSample struct {
	J                          *Judged
	Total                      string
	Context, Prediction, Truth string
}

// htmlPage is the report template's data. The template reads fields only:
// its template package cannot call methods (see package ui's doc), so what
// a method computes is put here.
type htmlPage struct {
	Title, Label string
	Report       *Report
	RulesOnly    bool      // Report.RulesOnly
	Pair         *htmlPair // Report.Pair's headings and rows; nil for a scored run
	Chart        template.HTML
	Domains      []htmlDomain
	Worst        []htmlSample
	Trust        *Trust
	Categories   []taxonomy.Category
	Taxonomy     []htmlTaxRow
}

// htmlPair is a pairwise report's part of the page.
type htmlPair struct {
	Title, Meaning, RateLabel string
	BothOrders                bool
	Rows                      []PairRow
	DomainMean                Num
}

type htmlTaxRow struct {
	Domain            string
	Classified, Clean int
	Counts            []int
}

// taxonomyRows lays the taxonomy out as one row per domain, in order.
func taxonomyRows(c *taxonomy.Counts, order []string) []htmlTaxRow {
	var out []htmlTaxRow
	if c == nil {
		return nil
	}
	for _, d := range order {
		if _, ok := c.Classified[d]; !ok {
			continue
		}
		row := htmlTaxRow{Domain: d, Classified: c.Classified[d], Clean: c.Clean[d]}
		for _, cat := range taxonomy.All {
			row.Counts = append(row.Counts, c.ByDomain[d][cat])
		}
		out = append(out, row)
	}
	return out
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{"ci": ciText, "pct": pctText}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{.Title}}{{if .Label}}: {{.Label}}{{end}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}
.headline{font-size:1.4em;font-weight:600}.note{color:#a33}
pre{white-space:pre-wrap;word-break:break-word;background:#f8f8f8;border:1px solid #ddd;padding:.6em;font-size:.85em;max-height:30em;overflow:auto;margin:.3em 0}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em}.sample{border-top:2px solid #3b6ea8;margin-top:2em;padding-top:.5em}
.weak li{color:#a33}
</style></head><body>
<h1>{{.Title}}{{if .Label}}: {{.Label}}{{end}}</h1>
{{range .Report.JudgePrompts}}<p>Judge prompts: {{.}}</p>{{end}}
{{if .Report.PromptFiles}}<table><tr><th>judge prompt file</th><th>SHA-256</th></tr>{{range .Report.PromptFiles}}<tr><td>{{.Path}}</td><td><code>{{.SHA256}}</code></td></tr>{{end}}</table>{{end}}
{{if .Report.PromptsUnpinned}}<p class="note">These judge prompt files differ from the official commit's: {{range .Report.PromptsUnpinned}}{{.}} {{end}}</p>{{end}}
{{with .Pair}}<h2>{{.Title}}</h2>
<p>{{.Meaning}}. Position A is the share of "A" answers (50% = no position bias){{if .BothOrders}}; flip is the share of samples judged in both orders whose answers picked different sides{{end}}.</p>
<table><tr><th>domain</th><th>n</th><th>valid</th><th>failed</th><th>judgments</th><th>{{.RateLabel}}</th><th>95% CI</th><th>position A %</th><th>flip %</th></tr>
{{range .Rows}}<tr><td>{{.Name}}</td><td>{{.S.N}}</td><td>{{.S.Valid}}</td><td>{{.S.Failed}}</td><td>{{.S.Judgments}}</td><td><b>{{.S.Rate}}</b></td><td>{{ci .S.CI95}}</td><td>{{.S.PositionA}}</td><td>{{.S.FlipRate}}</td></tr>
{{end}}</table>
<p><small>Overall pools every judgment; mean of the domain rates: {{.DomainMean}}. Intervals: bootstrap over trajectories ((task, id) clusters).</small></p>
{{if $.Report.Strict}}<p class="note">Strict: each failed sample counts against the world model.</p>{{else}}<p>Failed samples are left out of the rates.</p>{{end}}
{{end}}{{if not .Pair}}<p class="headline">Overall (mean of domain scores, leaderboard headline): {{.Report.OverallDomainMean}} <small>95% CI {{ci .Report.OverallCI95}}</small></p>
<p>Overall (all samples pooled, the published script's figure): {{.Report.OverallSampleMean}}</p>
{{if .Report.Strict}}<p class="note">Strict: failed samples are scored 1 on every dimension.</p>{{else}}<p>Failed samples are excluded from the means (published convention); their counts are shown beside each score.</p>{{end}}
{{if .RulesOnly}}<p class="note">Scored by the offline rules scorer, not the rubric judge: not comparable with published scores.</p>{{end}}
<figure role="img" aria-label="score by domain">{{.Chart}}</figure>
<table><tr><th>domain</th><th>n</th><th>valid</th><th>failed</th><th>format</th><th>factuality</th><th>consistency</th><th>realism</th><th>quality</th><th>total</th><th>95% CI</th><th>failure reasons</th></tr>
{{range .Domains}}<tr><td>{{.Name}}</td><td>{{.S.N}}</td><td>{{.S.Valid}}</td><td>{{.S.Failed}}</td><td>{{.S.Format}}</td><td>{{.S.Factuality}}</td><td>{{.S.Consistency}}</td><td>{{.S.Realism}}</td><td>{{.S.Quality}}</td><td><b>{{.S.Total}}</b></td><td>{{ci .S.CI95}}</td><td>{{.Failures}}</td></tr>
{{end}}</table>
<p><small>Scores are (mean − 1) / 4 × 100 of the 1–5 judge scores. Intervals: bootstrap over trajectories ((task, id) clusters), {{.Report.Resamples}} resamples, seed {{.Report.Seed}}.</small></p>
{{with .Trust}}<h2>Trust report</h2>
{{range .Agree.Warnings}}<p class="note">WARNING: {{.}}</p>{{end}}
<ul>{{range .Agree.ParseFailures}}{{if .Judged}}<li>judge {{.Judge}}: {{.Unparsable}} of {{.Judged}} answers never parsed ({{pct .Rate}})</li>{{end}}{{end}}</ul>
{{if $.Taxonomy}}<h3>Error taxonomy</h3><p><small>Samples per category (one sample can be in several), from rule checks, generation flags, low scores and the judge's weaknesses.</small></p>
<table><tr><th>domain</th><th>classified</th><th>clean</th>{{range $.Categories}}<th>{{.}}</th>{{end}}</tr>
{{range $.Taxonomy}}<tr><td>{{.Domain}}</td><td>{{.Classified}}</td><td>{{.Clean}}</td>{{range .Counts}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{else}}<p>Error taxonomy: no judged sample to classify.</p>{{end}}
{{if .Agree.Gaps}}<p>Not available:</p><ul>{{range .Agree.Gaps}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{end}}<h2>Worst samples</h2>
{{if not .Worst}}<p>No valid samples.</p>{{end}}
{{range .Worst}}<div class="sample">
<h3>{{.J.Domain}} · id {{.J.ID}} · turn {{.J.TurnIdx}} · total {{.Total}}</h3>
<p>format {{.J.Scores.Format}} · factuality {{.J.Scores.Factuality}} · consistency {{.J.Scores.Consistency}} · realism {{.J.Scores.Realism}} · quality {{.J.Scores.Quality}}{{if .J.Judge}} · judge {{.J.Judge}}{{end}}</p>
{{if .J.Weaknesses}}<ul class="weak">{{range .J.Weaknesses}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Context}}<details><summary>context (end of history and current action)</summary><pre>{{.Context}}</pre></details>{{end}}
<div class="pair"><div><b>prediction</b><pre>{{.Prediction}}</pre></div><div><b>ground truth</b><pre>{{.Truth}}</pre></div></div>
</div>{{end}}
{{end}}</body></html>
`))

// pctText renders a rate as a percentage with one decimal.
func pctText(n agree.Num) string {
	if math.IsNaN(float64(n)) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n))
}
