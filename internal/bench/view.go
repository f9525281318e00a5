package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/agentworld/agentworld/internal/agree"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/runview"
	"github.com/agentworld/agentworld/internal/taxonomy"
)

// IndexFile is the index a run browser keeps in a run directory: a header
// line with the run's figures, then one short line per sample (its place
// in judged.jsonl, scores, failure and error categories), so a page of
// samples is read without reading the judged rows, which carry every
// generation and judge answer. It is rebuilt whenever judged.jsonl
// changes size or time.
const IndexFile = "view.index"

// indexVersion changes when the index format does.
const indexVersion = 1

// DefaultPageSize is the number of samples a page holds by default.
const DefaultPageSize = 50

type indexHeader struct {
	Version int   `json:"version"`
	Size    int64 `json:"judged_size"`
	MTime   int64 `json:"judged_mtime"`
	// Count is the number of entry lines after the header.
	Count      int              `json:"count"`
	Info       runview.RunInfo  `json:"info"`
	Domains    []runview.Domain `json:"domains"`
	SampleMean runview.Num      `json:"sample_mean"`
	Taxonomy   *taxonomy.Counts `json:"taxonomy"`
	Trust      *agree.Report    `json:"trust"`
}

// indexEntry is one sample of the index.
type indexEntry struct {
	Off     int64               `json:"o"`
	Len     int                 `json:"n"`
	Key     string              `json:"k"`
	Domain  string              `json:"d"`
	Task    string              `json:"task"`
	ID      string              `json:"i"`
	Turn    int                 `json:"t"`
	Model   string              `json:"m"`
	Judge   string              `json:"j"`
	Scores  *Scores             `json:"s,omitempty"`
	Failure string              `json:"f,omitempty"`
	Cats    []taxonomy.Category `json:"c,omitempty"`
}

func (e *indexEntry) valid() bool { return e.Failure == "" && e.Scores != nil }

func (e *indexEntry) row() runview.SampleRow {
	r := runview.SampleRow{Key: e.Key, Domain: e.Domain, ID: e.ID, Turn: e.Turn, Total: runview.NaN(), Failure: e.Failure, Categories: e.Cats}
	if e.valid() {
		r.Total = runview.Num(e.Scores.Total())
	}
	return r
}

// ViewOptions configure a [ViewSource]; nil means defaults.
type ViewOptions struct {
	// Resamples for the run figures' intervals. Zero: DefaultResamples.
	Resamples int
}

// ViewSource reads run directories for the run browser
// ([runview.Source]): each of its roots is a run directory (holding
// judged.jsonl) or a directory of run directories. A run is named by its
// directory's base name. Each run's index ([IndexFile]) is written into
// its directory when it can be, and kept in memory otherwise.
type ViewSource struct {
	roots []string
	o     ViewOptions

	mu  sync.Mutex
	mem map[string]*memIndex // run dir → an index that could not be written
}

type memIndex struct {
	hdr     *indexHeader
	entries []byte
}

var _ runview.Source = (*ViewSource)(nil)

// NewViewSource returns a source over roots.
func NewViewSource(roots []string, opts *ViewOptions) *ViewSource {
	var o ViewOptions
	if opts != nil {
		o = *opts
	}
	return &ViewSource{roots: roots, o: o, mem: map[string]*memIndex{}}
}

// dirs lists the run directories under the roots, by name.
func (v *ViewSource) dirs() (map[string]string, []string, error) {
	out := map[string]string{}
	var names []string
	add := func(dir string) {
		name := filepath.Base(dir)
		if _, dup := out[name]; dup {
			name = filepath.Base(filepath.Dir(dir)) + "-" + name
		}
		out[name] = dir
		names = append(names, name)
	}
	for _, r := range v.roots {
		st, err := os.Stat(r)
		if err != nil {
			return nil, nil, fmt.Errorf("runs: %w", err)
		}
		if !st.IsDir() {
			return nil, nil, fmt.Errorf("runs: %s is not a directory", r)
		}
		if isRunDir(r) {
			add(filepath.Clean(r))
			continue
		}
		ents, err := os.ReadDir(r)
		if err != nil {
			return nil, nil, fmt.Errorf("runs: %w", err)
		}
		for _, e := range ents {
			if d := filepath.Join(r, e.Name()); e.IsDir() && isRunDir(d) {
				add(d)
			}
		}
	}
	sort.Strings(names)
	return out, names, nil
}

// isRunDir reports whether dir holds a run's files.
func isRunDir(dir string) bool {
	for _, f := range []string{JudgedFile, PredictionsFile, RunFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

func (v *ViewSource) dir(name string) (string, error) {
	m, _, err := v.dirs()
	if err != nil {
		return "", err
	}
	d, ok := m[name]
	if !ok {
		return "", fmt.Errorf("run %q: %w", name, runview.ErrNotFound)
	}
	return d, nil
}

// Runs implements runview.Source. A run that cannot be read is listed
// with its error.
func (v *ViewSource) Runs(ctx context.Context) ([]runview.RunInfo, error) {
	m, names, err := v.dirs()
	if err != nil {
		return nil, err
	}
	out := make([]runview.RunInfo, 0, len(names))
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, _, err := v.index(m[n])
		if err != nil {
			out = append(out, runview.RunInfo{Name: n, Overall: runview.NaN(), CI: [2]runview.Num{runview.NaN(), runview.NaN()}, Err: err.Error()})
			continue
		}
		info := hdr.Info
		info.Name = n
		out = append(out, info)
	}
	return out, nil
}

// Run implements runview.Source.
func (v *ViewSource) Run(ctx context.Context, name string, labels []agree.Label) (*runview.Run, error) {
	d, err := v.dir(name)
	if err != nil {
		return nil, err
	}
	hdr, ents, err := v.index(d)
	if err != nil {
		return nil, err
	}
	hdr.Info.Name = name
	r := &runview.Run{Info: hdr.Info, Domains: hdr.Domains, SampleMean: hdr.SampleMean, Trust: hdr.Trust, Taxonomy: hdr.Taxonomy}
	if len(labels) > 0 {
		es, err := readEntries(ents, func(*indexEntry) bool { return true })
		if err != nil {
			return nil, err
		}
		samples := make([]agree.Sample, len(es))
		for i, e := range es {
			samples[i] = entrySample(e)
		}
		r.Trust = agree.Analyze(samples, labels, nil)
	}
	return r, nil
}

func entrySample(e *indexEntry) agree.Sample {
	s := agree.Sample{Key: e.Key, Cluster: e.Task + "\x00" + e.ID, Domain: e.Domain, Model: e.Model, Judge: e.Judge,
		Failed: !e.valid(), JudgeUnparsable: e.Failure == FailJudgeUnparsable}
	if e.Scores != nil {
		s.Scores = *e.Scores
	}
	return s
}

// textMatches returns the keys of the judged rows of dir that contain
// text, case-insensitively, streaming the file.
func textMatches(dir, text string) (map[string]bool, error) {
	f, err := os.Open(filepath.Join(dir, JudgedFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	needle := bytes.ToLower([]byte(text))
	out := map[string]bool{}
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && bytes.Contains(bytes.ToLower(line), needle) {
			var k struct {
				Sample string `json:"sample"`
			}
			if json.Unmarshal(line, &k) == nil {
				out[k.Sample] = true
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
	}
}

func (q runQuery) keep(e *indexEntry, text map[string]bool) bool {
	if q.Domain != "" && e.Domain != q.Domain {
		return false
	}
	switch {
	case q.Category == "clean":
		if len(e.Cats) > 0 || !e.valid() {
			return false
		}
	case q.Category != "":
		if !slices.Contains(e.Cats, taxonomy.Category(q.Category)) {
			return false
		}
	}
	if q.Min.Known() || q.Max.Known() {
		if !e.valid() {
			return false
		}
		t := e.Scores.Total()
		if (q.Min.Known() && t < float64(q.Min)) || (q.Max.Known() && t > float64(q.Max)) {
			return false
		}
	}
	return text == nil || text[e.Key]
}

type runQuery struct{ runview.Query }

// Samples implements runview.Source. Unfiltered, it reads only the index
// lines up to the end of the page.
func (v *ViewSource) Samples(ctx context.Context, name string, q runview.Query) (*runview.Page, error) {
	d, err := v.dir(name)
	if err != nil {
		return nil, err
	}
	hdr, open, err := v.index(d)
	if err != nil {
		return nil, err
	}
	if q.Limit <= 0 {
		q.Limit = DefaultPageSize
	}
	q.Offset = max(q.Offset, 0)
	p := &runview.Page{Offset: q.Offset, Total: -1}
	if q.Unfiltered() {
		p.Total = hdr.Count
		rc, err := open()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		br := bufio.NewReaderSize(rc, 64<<10)
		for i := 0; ; i++ {
			line, err := br.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				return nil, fmt.Errorf("%s: entry %d too long", IndexFile, i+1)
			}
			if len(line) == 0 {
				return p, nil
			}
			if i >= q.Offset+q.Limit {
				p.More = true
				return p, nil
			}
			if i >= q.Offset {
				e := new(indexEntry)
				if err := json.Unmarshal(line, e); err != nil {
					return nil, fmt.Errorf("%s: %w", IndexFile, err)
				}
				p.Rows = append(p.Rows, e.row())
			}
			if err != nil {
				return p, nil
			}
		}
	}
	var text map[string]bool
	if q.Text != "" {
		if text, err = textMatches(d, q.Text); err != nil {
			return nil, err
		}
	}
	rq := runQuery{q}
	es, err := readEntries(open, func(e *indexEntry) bool { return rq.keep(e, text) })
	if err != nil {
		return nil, err
	}
	total := func(e *indexEntry) float64 {
		if !e.valid() {
			return math.Inf(-1)
		}
		return e.Scores.Total()
	}
	switch q.Sort {
	case "total":
		sort.SliceStable(es, func(i, j int) bool { return total(es[i]) < total(es[j]) })
	case "-total":
		sort.SliceStable(es, func(i, j int) bool { return total(es[i]) > total(es[j]) })
	}
	p.Total = len(es)
	for _, e := range es[min(q.Offset, len(es)):min(q.Offset+q.Limit, len(es))] {
		p.Rows = append(p.Rows, e.row())
	}
	p.More = q.Offset+q.Limit < len(es)
	return p, nil
}

// Sample implements runview.Source: the row is read at its place in
// judged.jsonl, its record from the run's data.
func (v *ViewSource) Sample(ctx context.Context, name, key string) (*runview.Sample, error) {
	d, err := v.dir(name)
	if err != nil {
		return nil, err
	}
	_, open, err := v.index(d)
	if err != nil {
		return nil, err
	}
	es, err := readEntries(open, func(e *indexEntry) bool { return e.Key == key })
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, fmt.Errorf("run %s: sample %q: %w", name, key, runview.ErrNotFound)
	}
	e := es[0]
	f, err := os.Open(filepath.Join(d, JudgedFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, e.Len)
	if _, err := f.ReadAt(buf, e.Off); err != nil {
		return nil, fmt.Errorf("run %s: read sample %q: %w", name, key, err)
	}
	j := new(Judged)
	if err := json.Unmarshal(bytes.TrimSpace(buf), j); err != nil {
		return nil, fmt.Errorf("run %s: sample %q: %w (rebuild the index by touching %s)", name, key, err, JudgedFile)
	}
	s := &runview.Sample{Row: e.row(), Model: j.Model, Judge: j.Judge, Prediction: j.Prediction.Prediction, Generation: j.Generation,
		Reasoning: j.Reasoning, Scores: j.Scores, Strengths: j.Strengths, Weaknesses: j.Weaknesses, JudgeOutput: j.JudgeOutput,
		Truncated: j.Truncated, FinishReason: j.FinishReason, JudgeAttempts: j.Attempts}
	dataDir, _ := RunData(d)
	recs, rerr := LoadRecords(dataDir, []*Judged{j})
	rec := recs[j.Sample]
	switch {
	case rerr != nil:
		s.RecordErr = rerr.Error()
	case rec == nil:
		s.RecordErr = fmt.Sprintf("record %s:%d not found under the run's data %q", j.File, j.Line, dataDir)
	case rec.Validate() != nil:
		s.RecordErr = rec.Validate().Error()
		rec = nil
	}
	if rec != nil {
		for i := 0; i < rec.TurnIdx-1; i++ {
			s.History = append(s.History, runview.Turn{Action: rec.Prompt[i], Observation: rec.Response[i]})
		}
		s.Action = rec.CurrentPrompt
		if s.Action == "" {
			s.Action = rec.Prompt[rec.TurnIdx-1]
		}
		s.Truth = rec.GroundTruth()
		sc, verdict := judge.Rules(rec, j.Prediction.Prediction)
		s.Rules = &sc
		s.RuleFindings = verdict.Weaknesses
	}
	s.Findings = taxonomy.Classify(TaxonomyInput(j, rec))
	return s, nil
}

// Compare implements runview.Source: the two runs' samples joined by
// sample key, filtered, sorted and paged. Min and Max bound B's total.
func (v *ViewSource) Compare(ctx context.Context, a, b string, q runview.Query) (*runview.Comparison, error) {
	da, err := v.dir(a)
	if err != nil {
		return nil, err
	}
	db, err := v.dir(b)
	if err != nil {
		return nil, err
	}
	ha, oa, err := v.index(da)
	if err != nil {
		return nil, err
	}
	hb, ob, err := v.index(db)
	if err != nil {
		return nil, err
	}
	all := func(*indexEntry) bool { return true }
	ea, err := readEntries(oa, all)
	if err != nil {
		return nil, err
	}
	eb, err := readEntries(ob, all)
	if err != nil {
		return nil, err
	}
	var ta, tb map[string]bool
	if q.Text != "" {
		if ta, err = textMatches(da, q.Text); err != nil {
			return nil, err
		}
		if tb, err = textMatches(db, q.Text); err != nil {
			return nil, err
		}
	}
	byB := make(map[string]*indexEntry, len(eb))
	for _, e := range eb {
		byB[e.Key] = e
	}
	c := &runview.Comparison{A: ha.Info, B: hb.Info, Offset: max(q.Offset, 0)}
	c.A.Name, c.B.Name = a, b
	num := func(e *indexEntry) runview.Num {
		if e == nil || !e.valid() {
			return runview.NaN()
		}
		return runview.Num(e.Scores.Total())
	}
	seen := map[string]bool{}
	var rows []runview.ComparePair
	rq := runQuery{q}
	rq.Min, rq.Max, rq.Category = runview.NaN(), runview.NaN(), ""
	for _, x := range ea {
		seen[x.Key] = true
		y := byB[x.Key]
		if y == nil {
			c.OnlyA++
			continue
		}
		if !rq.keep(x, nil) {
			continue
		}
		if ta != nil && !ta[x.Key] && !tb[x.Key] {
			continue
		}
		if q.Category != "" {
			cat := taxonomy.Category(q.Category)
			if !slices.Contains(x.Cats, cat) && !slices.Contains(y.Cats, cat) {
				continue
			}
		}
		p := runview.ComparePair{Key: x.Key, Domain: x.Domain, ID: x.ID, Turn: x.Turn, A: num(x), B: num(y), CatsA: x.Cats, CatsB: y.Cats}
		p.Delta = p.B - p.A
		if (q.Min.Known() && (!p.B.Known() || p.B < q.Min)) || (q.Max.Known() && (!p.B.Known() || p.B > q.Max)) {
			continue
		}
		rows = append(rows, p)
	}
	for _, y := range eb {
		if !seen[y.Key] {
			c.OnlyB++
		}
	}
	// Unknown values (a failed sample) sort last whichever the direction.
	by := func(f func(p runview.ComparePair) runview.Num, desc bool) func(i, j int) bool {
		return func(i, j int) bool {
			a, b := f(rows[i]), f(rows[j])
			switch {
			case !a.Known():
				return false
			case !b.Known():
				return true
			case desc:
				return a > b
			}
			return a < b
		}
	}
	delta := func(p runview.ComparePair) runview.Num { return p.Delta }
	switch q.Sort {
	case "delta":
		sort.SliceStable(rows, by(delta, false))
	case "-delta":
		sort.SliceStable(rows, by(delta, true))
	case "absdelta":
		sort.SliceStable(rows, by(func(p runview.ComparePair) runview.Num { return runview.Num(math.Abs(float64(p.Delta))) }, true))
	case "total":
		sort.SliceStable(rows, by(func(p runview.ComparePair) runview.Num { return p.A }, false))
	case "-total":
		sort.SliceStable(rows, by(func(p runview.ComparePair) runview.Num { return p.A }, true))
	}
	if q.Limit <= 0 {
		q.Limit = DefaultPageSize
	}
	c.Total = len(rows)
	c.Rows = rows[min(c.Offset, len(rows)):min(c.Offset+q.Limit, len(rows))]
	return c, nil
}

// Agree implements runview.Source: the runs' samples, read from their
// indexes, analyzed together.
func (v *ViewSource) Agree(ctx context.Context, names []string, labels []agree.Label, o *agree.Options) (*agree.Report, error) {
	var samples []agree.Sample
	for _, n := range names {
		d, err := v.dir(n)
		if err != nil {
			return nil, err
		}
		_, open, err := v.index(d)
		if err != nil {
			return nil, err
		}
		es, err := readEntries(open, func(*indexEntry) bool { return true })
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			samples = append(samples, entrySample(e))
		}
	}
	return agree.Analyze(samples, labels, o), nil
}
