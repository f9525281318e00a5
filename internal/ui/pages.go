package ui

import (
	"bytes"
	"crypto/hmac"
	"errors"
	"fmt"
	"image/color"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	template "github.com/DataDog/datadog-agent/pkg/template/html"

	"github.com/agentworld/agentworld/internal/agree"
	"github.com/agentworld/agentworld/internal/chart"
	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/labels"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/runview"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/taxonomy"
)

type indexData struct {
	Runs               []runview.RunInfo
	RunsErr            string
	Rollouts           []string
	Research           []string
	HaveSessions       bool
	CompareA, CompareB string
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	d := indexData{HaveSessions: s.o.Sessions != nil}
	if s.o.Runs != nil {
		runs, err := s.o.Runs.Runs(r.Context())
		if err != nil {
			d.RunsErr = err.Error()
		}
		d.Runs = runs
		if len(runs) >= 2 {
			d.CompareA, d.CompareB = runs[0].Name, runs[1].Name
		}
	}
	d.Rollouts = runDirs(s.o.Rollouts, "summary.json", "episodes.jsonl")
	d.Research = runDirs(s.o.Research, "journal.jsonl")
	s.render(w, r, "index", "Runs", d)
}

// runDirs lists, by base name, the directories among roots (or directly
// under them) that hold one of the marker files.
func runDirs(roots []string, markers ...string) []string {
	var out []string
	has := func(d string) bool {
		for _, m := range markers {
			if _, err := os.Stat(filepath.Join(d, m)); err == nil {
				return true
			}
		}
		return false
	}
	for _, r := range roots {
		if has(r) {
			out = append(out, filepath.Base(filepath.Clean(r)))
			continue
		}
		ents, _ := os.ReadDir(r)
		for _, e := range ents {
			if e.IsDir() && has(filepath.Join(r, e.Name())) {
				out = append(out, e.Name())
			}
		}
	}
	sort.Strings(out)
	return out
}

// dirOf finds a run directory named name among roots.
func dirOf(roots []string, name string, markers ...string) (string, error) {
	for _, r := range roots {
		if filepath.Base(filepath.Clean(r)) == name {
			return r, nil
		}
		d := filepath.Join(r, name)
		if filepath.Base(d) != name || strings.ContainsAny(name, `/\`) || name == ".." {
			continue
		}
		for _, m := range markers {
			if _, err := os.Stat(filepath.Join(d, m)); err == nil {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("%q: %w", name, runview.ErrNotFound)
}

type runData struct {
	Run        *runview.Run
	Chart      template.HTML
	Samples    *runview.Page
	Pager      pager
	Query      runview.Query
	QueryVals  url.Values
	Categories []taxonomy.Category
	TaxRows    []taxRow
	Dimensions []string
	Others     []string
}

type taxRow struct {
	Domain            string
	Classified, Clean int
	Cells             []taxCell
}

type taxCell struct {
	Category taxonomy.Category
	N        int
	Share    float64
}

func taxRows(c *taxonomy.Counts, order []runview.Domain) []taxRow {
	if c == nil {
		return nil
	}
	var out []taxRow
	for _, d := range order {
		if _, ok := c.Classified[d.Name]; !ok {
			continue
		}
		row := taxRow{Domain: d.Name, Classified: c.Classified[d.Name], Clean: c.Clean[d.Name]}
		for _, cat := range taxonomy.All {
			row.Cells = append(row.Cells, taxCell{Category: cat, N: c.ByDomain[d.Name][cat], Share: c.Share(d.Name, cat)})
		}
		out = append(out, row)
	}
	return out
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	if s.o.Runs == nil {
		s.failErr(w, r, fmt.Errorf("no runs: %w", runview.ErrNotFound))
		return
	}
	name := r.PathValue("run")
	q, err := queryOf(r.URL.Query(), s.o.PageSize)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	ls, err := s.labelsOf(r.Context(), name)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	run, err := s.o.Runs.Run(r.Context(), name, ls)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	page, err := s.o.Runs.Samples(r.Context(), name, q)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	d := runData{Run: run, Samples: page, Query: q, QueryVals: r.URL.Query(), Categories: taxonomy.All, Dimensions: score.Dimensions,
		Pager: newPager(r.URL, q.Offset, s.o.PageSize, page.Total, page.More), TaxRows: taxRows(run.Taxonomy, run.Domains)}
	if d.Chart, err = domainChart(run); err != nil {
		s.failErr(w, r, err)
		return
	}
	if runs, err := s.o.Runs.Runs(r.Context()); err == nil {
		for _, o := range runs {
			if o.Name != name && o.Err == "" {
				d.Others = append(d.Others, o.Name)
			}
		}
	}
	s.render(w, r, "run", "Run "+name, d)
}

// domainChart draws the domain totals with their intervals and the
// headline as an inline SVG (our own markup, every label escaped).
func domainChart(run *runview.Run) (template.HTML, error) {
	b := &chart.Bars{Title: "score by domain (0-100)", YLabel: "score", YMax: 100}
	for _, d := range run.Domains {
		v := float64(d.Total)
		if !d.Total.Known() {
			v = 0
		}
		lo, hi := float64(d.CI[0]), float64(d.CI[1])
		if !d.CI[0].Known() || !d.CI[1].Known() {
			lo, hi = v, v
		}
		b.Labels, b.Values, b.Lo, b.Hi = append(b.Labels, d.Name), append(b.Values, v), append(b.Lo, lo), append(b.Hi, hi)
	}
	if len(b.Labels) == 0 {
		b.Labels, b.Values, b.Lo, b.Hi = []string{"(no samples)"}, []float64{0}, []float64{0}, []float64{0}
	}
	if m := run.Info.Overall; m.Known() {
		b.Ref = &chart.Ref{Value: float64(m), Label: fmt.Sprintf("overall %.2f", float64(m)), Color: color.RGBA{R: 0xc0, G: 0x39, B: 0x2b, A: 0xff}}
	}
	var buf bytes.Buffer
	pg := &chart.Page{Width: max(480, 140+90*len(b.Labels)), Height: 320, Panels: []chart.Panel{b}}
	if err := pg.WriteSVG(&buf); err != nil {
		return "", err
	}
	svg := buf.String()
	return template.HTML(svg[strings.Index(svg, "<svg"):]), nil
}

type sampleData struct {
	Run      string
	S        *runview.Sample
	Diff     []diffLine
	DiffNote string
	Token    string
	Nonce    string
	First    string // the text shown as "A" in a Turing pick
	Second   string
	Saved    string
	Dims     []string
	Labels   []labels.Label
	Kappa    []agree.HumanAgreement
	Error    string
}

func (s *Server) sample(w http.ResponseWriter, r *http.Request) {
	if s.o.Runs == nil {
		s.failErr(w, r, fmt.Errorf("no runs: %w", runview.ErrNotFound))
		return
	}
	run, key := r.PathValue("run"), r.PathValue("key")
	smp, err := s.o.Runs.Sample(r.Context(), run, key)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	d := sampleData{Run: run, S: smp, Dims: score.Dimensions, Saved: r.URL.Query().Get("saved")}
	if smp.Truth != "" || smp.RecordErr == "" {
		d.Diff, d.DiffNote = lineDiff(conversation.StripObservationMarker(smp.Prediction), conversation.StripObservationMarker(smp.Truth))
	}
	if s.o.Labels != nil {
		d.Token, d.Nonce = s.token(run, key), newNonce()
		// The marker is stripped from both, or it would name the truth.
		pred, truth := conversation.StripObservationMarker(smp.Prediction), conversation.StripObservationMarker(smp.Truth)
		d.First, d.Second = pred, truth
		if s.truthFirst(d.Nonce) {
			d.First, d.Second = truth, pred
		}
		all, err := s.o.Labels.List(r.Context(), run)
		if err != nil {
			s.failErr(w, r, err)
			return
		}
		for _, l := range all {
			if l.Sample == key {
				d.Labels = append(d.Labels, l)
			}
		}
	}
	s.render(w, r, "sample", "Sample "+smp.Row.ID, d)
}

// label stores one label: the page's CSRF token must match the sample,
// the sample must exist in the run, and the values must be valid; any
// failure stores nothing.
func (s *Server) label(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxLabelBytes)
	if err := r.ParseForm(); err != nil {
		s.failErr(w, r, fmt.Errorf("%w: the form could not be read: %v", errBadRequest, err))
		return
	}
	f := r.PostForm
	run, key := f.Get("run"), f.Get("sample")
	if !hmac.Equal([]byte(f.Get("token")), []byte(s.token(run, key))) {
		s.failErr(w, r, fmt.Errorf("%w: field token: missing or not this page's (reload the sample page)", errForbidden))
		return
	}
	smp, err := s.o.Runs.Sample(r.Context(), run, key)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	l := labels.Label{Run: run, Sample: key, Model: smp.Model, Labeler: strings.TrimSpace(f.Get("labeler"))}
	switch f.Get("kind") {
	case "turing":
		pick := f.Get("pick")
		if pick != "first" && pick != "second" {
			s.failErr(w, r, fmt.Errorf("%w: field pick: %q is neither first nor second", errBadRequest, pick))
			return
		}
		truthFirst := s.truthFirst(f.Get("nonce"))
		l.TuringPick = agree.PickPrediction
		if (pick == "first") == truthFirst {
			l.TuringPick = agree.PickTruth
		}
	case "scores":
		vals := make([]int, len(score.Dimensions))
		for i, dim := range score.Dimensions {
			v, err := strconv.Atoi(f.Get(dim))
			if err != nil {
				s.failErr(w, r, fmt.Errorf("%w: field %s: %q is not a score 1..5", errBadRequest, dim, f.Get(dim)))
				return
			}
			vals[i] = v
		}
		l.Scores = score.Scores{Format: vals[0], Factuality: vals[1], Consistency: vals[2], Realism: vals[3], Quality: vals[4]}
	default:
		s.failErr(w, r, fmt.Errorf("%w: field kind: %q is neither scores nor turing", errBadRequest, f.Get("kind")))
		return
	}
	if err := s.o.Labels.Add(r.Context(), &l); err != nil {
		s.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(run)+"/samples/"+url.PathEscape(key)+"?saved="+strconv.FormatInt(l.ID, 10), http.StatusSeeOther)
}

type diffLine struct {
	Op   string // "-", "+", " "
	Text string
}

// maxDiffCells bounds the diff's table (lines of prediction × lines of
// truth); past it the two texts are shown side by side without a diff.
const maxDiffCells = 4 << 20

// lineDiff diffs the prediction against the truth line by line: "-" lines
// only the prediction has, "+" lines only the truth has.
func lineDiff(pred, truth string) ([]diffLine, string) {
	a, b := strings.Count(pred, "\n")+1, strings.Count(truth, "\n")+1
	if a*b > maxDiffCells {
		return nil, fmt.Sprintf("texts too long to diff (%d × %d lines); shown side by side", a, b)
	}
	var out []diffLine
	for _, l := range strings.Split(strings.TrimSuffix(promptlib.LineDiff(pred, truth), "\n"), "\n") {
		if l == "" {
			continue
		}
		out = append(out, diffLine{Op: l[:1], Text: l[1:]})
	}
	return out, ""
}

// taxCmpRow is one category of two runs' taxonomies, all domains.
type taxCmpRow struct {
	Category       taxonomy.Category
	A, B           int
	ShareA, ShareB float64
	Delta          float64 // percentage points, B − A
}

func taxCompare(a, b *taxonomy.Counts) []taxCmpRow {
	if a == nil || b == nil {
		return nil
	}
	total := func(c *taxonomy.Counts) int {
		n := 0
		for _, v := range c.Classified {
			n += v
		}
		return n
	}
	na, nb := total(a), total(b)
	var out []taxCmpRow
	for _, cat := range taxonomy.All {
		r := taxCmpRow{Category: cat, A: a.Total(cat), B: b.Total(cat), ShareA: math.NaN(), ShareB: math.NaN(), Delta: math.NaN()}
		if na > 0 {
			r.ShareA = float64(r.A) / float64(na)
		}
		if nb > 0 {
			r.ShareB = float64(r.B) / float64(nb)
		}
		if na > 0 && nb > 0 {
			r.Delta = 100 * (r.ShareB - r.ShareA)
		}
		out = append(out, r)
	}
	return out
}

type compareData struct {
	TaxCmp     []taxCmpRow
	CatLinks   map[taxonomy.Category]string
	C          *runview.Comparison
	Pager      pager
	Query      runview.Query
	Runs       []string
	Categories []taxonomy.Category
	Domains    []string
	SortLinks  map[string]string
}

func (s *Server) compare(w http.ResponseWriter, r *http.Request) {
	if s.o.Runs == nil {
		s.failErr(w, r, fmt.Errorf("no runs: %w", runview.ErrNotFound))
		return
	}
	v := r.URL.Query()
	a, b := v.Get("a"), v.Get("b")
	if a == "" || b == "" {
		s.failErr(w, r, fmt.Errorf("%w: fields a and b: name the two runs to compare", errBadRequest))
		return
	}
	q, err := queryOf(v, s.o.PageSize)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	c, err := s.o.Runs.Compare(r.Context(), a, b, q)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	d := compareData{C: c, Query: q, Categories: taxonomy.All, Pager: newPager(r.URL, q.Offset, s.o.PageSize, c.Total, false), SortLinks: map[string]string{}}
	for _, k := range []string{"delta", "-delta", "absdelta", "total", "-total"} {
		vv := r.URL.Query()
		vv.Set("sort", k)
		vv.Del("page")
		d.SortLinks[k] = "/compare?" + vv.Encode()
	}
	if runs, err := s.o.Runs.Runs(r.Context()); err == nil {
		for _, x := range runs {
			d.Runs = append(d.Runs, x.Name)
		}
	}
	doms := map[string]bool{}
	var tax [2]*taxonomy.Counts
	for i, x := range []string{a, b} {
		if run, err := s.o.Runs.Run(r.Context(), x, nil); err == nil {
			tax[i] = run.Taxonomy
			for _, dm := range run.Domains {
				if !doms[dm.Name] {
					doms[dm.Name] = true
					d.Domains = append(d.Domains, dm.Name)
				}
			}
		}
	}
	d.TaxCmp = taxCompare(tax[0], tax[1])
	d.CatLinks = map[taxonomy.Category]string{}
	for _, cat := range taxonomy.All {
		vv := r.URL.Query()
		vv.Set("cat", string(cat))
		vv.Del("page")
		d.CatLinks[cat] = "/compare?" + vv.Encode()
	}
	s.render(w, r, "compare", "Compare "+a+" and "+b, d)
}

type sessionsData struct {
	Sessions []store.SessionSummary
	Pager    pager
}

func (s *Server) sessions(w http.ResponseWriter, r *http.Request) {
	if s.o.Sessions == nil {
		s.failErr(w, r, fmt.Errorf("no session database (start with --db): %w", runview.ErrNotFound))
		return
	}
	q, err := queryOf(r.URL.Query(), s.o.PageSize)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	ss, err := s.o.Sessions.ListSessions(r.Context(), q.Offset, s.o.PageSize+1)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	more := len(ss) > s.o.PageSize
	if more {
		ss = ss[:s.o.PageSize]
	}
	s.render(w, r, "sessions", "Sessions", sessionsData{Sessions: ss, Pager: newPager(r.URL, q.Offset, s.o.PageSize, -1, more)})
}

type sessionData struct {
	Rec    sim.SessionRecord
	Turns  []sim.TurnRecord
	Total  int
	Pager  pager
	Family []treeNode
	Live   bool
}

type treeNode struct {
	store.SessionSummary
	Depth   int
	Current bool
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	if s.o.Sessions == nil {
		s.failErr(w, r, fmt.Errorf("no session database (start with --db): %w", runview.ErrNotFound))
		return
	}
	id := r.PathValue("id")
	q, err := queryOf(r.URL.Query(), s.o.PageSize)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	rec, turns, total, err := s.o.Sessions.TurnsPage(r.Context(), id, q.Offset+1, s.o.PageSize)
	if err != nil {
		if errors.Is(err, sim.ErrNotFound) {
			err = fmt.Errorf("session %q: %w", id, err)
		}
		s.failErr(w, r, err)
		return
	}
	d := sessionData{Rec: rec, Turns: turns, Total: total, Pager: newPager(r.URL, q.Offset, s.o.PageSize, total, false), Live: rec.Status == sim.StatusActive}
	root := rec.Root
	if root == "" {
		root = rec.ID
	}
	if fam, err := s.o.Sessions.SessionFamily(r.Context(), root); err == nil {
		d.Family = forkTree(fam, rec.ID)
	}
	s.render(w, r, "session", "Session "+id, d)
}

// forkTree orders a fork family depth-first from its root, children after
// their parent.
func forkTree(fam []store.SessionSummary, current string) []treeNode {
	kids := map[string][]store.SessionSummary{}
	ids := map[string]bool{}
	for _, f := range fam {
		ids[f.ID] = true
	}
	var roots []store.SessionSummary
	for _, f := range fam {
		if f.Parent == "" || !ids[f.Parent] {
			roots = append(roots, f)
		} else {
			kids[f.Parent] = append(kids[f.Parent], f)
		}
	}
	var out []treeNode
	var walk func(f store.SessionSummary, depth int)
	walk = func(f store.SessionSummary, depth int) {
		out = append(out, treeNode{SessionSummary: f, Depth: depth, Current: f.ID == current})
		for _, k := range kids[f.ID] {
			walk(k, depth+1)
		}
	}
	for _, f := range roots {
		walk(f, 0)
	}
	return out
}

func nanOr(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%.2f", f)
}

type agreeData struct {
	Runs     []runview.RunInfo
	Selected map[string]bool
	Report   *agree.Report
}

// agreePage analyzes the judges of the runs chosen (every readable run
// when none is), with every label: bench agree in the browser.
func (s *Server) agreePage(w http.ResponseWriter, r *http.Request) {
	if s.o.Runs == nil {
		s.failErr(w, r, fmt.Errorf("no runs: %w", runview.ErrNotFound))
		return
	}
	runs, err := s.o.Runs.Runs(r.Context())
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	names := r.URL.Query()["run"]
	if len(names) == 0 {
		for _, x := range runs {
			if x.Err == "" {
				names = append(names, x.Name)
			}
		}
	}
	ls, err := s.labelsOf(r.Context(), "")
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	rep, err := s.o.Runs.Agree(r.Context(), names, ls, nil)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	d := agreeData{Runs: runs, Selected: map[string]bool{}, Report: rep}
	for _, n := range names {
		d.Selected[n] = true
	}
	s.render(w, r, "agree", "Judge agreement", d)
}
