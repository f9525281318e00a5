// Package runview is what a browser of benchmark runs sees of them: the
// summary, figures, sample pages and sample details of run directories,
// and the [Source] interface that reads them. It holds types only, so the
// benchmark (which reads run directories) and the web UI (which shows
// them) meet here without the UI importing the benchmark.
package runview

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/agentworld/agentworld/internal/agree"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/taxonomy"
)

// ErrNotFound is returned for a run or sample a Source does not hold.
var ErrNotFound = errors.New("not found")

// Num is a figure that may be unknown (NaN), written as JSON null.
type Num float64

// NaN is the unknown figure.
func NaN() Num { return Num(math.NaN()) }

// Known reports whether n is not NaN.
func (n Num) Known() bool { return !math.IsNaN(float64(n)) }

// MarshalJSON writes NaN as null.
func (n Num) MarshalJSON() ([]byte, error) {
	if !n.Known() || math.IsInf(float64(n), 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(n), 'g', -1, 64), nil
}

// UnmarshalJSON reads a number or null (NaN).
func (n *Num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = NaN()
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// RunInfo is one run in the list of runs.
type RunInfo struct {
	Name   string `json:"name"`
	Model  string `json:"model"`
	Judge  string `json:"judge"`
	Judged int    `json:"judged"`
	Valid  int    `json:"valid"`
	Failed int    `json:"failed"`
	// Overall is the headline (mean of domain scores) with its 95% CI.
	Overall Num                 `json:"overall"`
	CI      score.Interval[Num] `json:"ci95"`
	// Err says why the run cannot be read (a truncated judged file, no
	// judged file yet); the figures are then unknown.
	Err string `json:"error,omitempty"`
}

// Domain is one domain's line of a run's figures (0–100 scores).
type Domain struct {
	Name             string `json:"name"`
	N, Valid, Failed int
	Dims             [5]Num              `json:"dims"`
	Total            Num                 `json:"total"`
	CI               score.Interval[Num] `json:"ci95"`
	Failures         string              `json:"failures"`
}

// Run is a run's page: its figures, trust report and error taxonomy.
type Run struct {
	Info    RunInfo  `json:"info"`
	Domains []Domain `json:"domains"`
	// SampleMean is the pooled figure of the published script.
	SampleMean Num `json:"sample_mean"`
	// Trust is the agreement report of this run's samples with the labels
	// given to Source.Run; Taxonomy its error categories per domain.
	Trust    *agree.Report    `json:"trust"`
	Taxonomy *taxonomy.Counts `json:"taxonomy"`
}

// SampleRow is one sample in a list.
type SampleRow struct {
	Key    string `json:"key"`
	Domain string `json:"domain"`
	ID     string `json:"id"`
	Turn   int    `json:"turn"`
	// Total is the 1–5 sample total; NaN for a failed sample.
	Total      Num                 `json:"total"`
	Failure    string              `json:"failure,omitempty"`
	Categories []taxonomy.Category `json:"categories,omitempty"`
}

// Query selects and orders samples. Zero values select everything in file
// order.
type Query struct {
	Domain string
	// Category keeps samples in that taxonomy category; "clean" those in
	// none.
	Category string
	// Min and Max bound the total (of either run, in a comparison: the
	// delta's side is chosen by the caller); NaN means no bound.
	Min, Max Num
	// Text keeps samples whose judged row contains it (case-insensitive).
	Text string
	// Sort orders rows: "" (file order), "total", "-total", and in a
	// comparison "delta", "-delta", "absdelta".
	Sort string
	// Offset and Limit page the result; Limit 0 means 50.
	Offset, Limit int
}

// Unfiltered reports whether q selects every sample in file order, the
// case a Source serves without reading the whole index.
func (q Query) Unfiltered() bool {
	return q.Domain == "" && q.Category == "" && !q.Min.Known() && !q.Max.Known() && q.Text == "" && q.Sort == ""
}

// Page is one page of samples. Total is the number of samples matched, or
// -1 when the page was read without counting them (More then says whether
// another page follows).
type Page struct {
	Rows   []SampleRow `json:"rows"`
	Offset int         `json:"offset"`
	Total  int         `json:"total"`
	More   bool        `json:"more"`
}

// Turn is one earlier turn of a sample's history.
type Turn struct {
	Action, Observation string
}

// Sample is everything about one judged sample.
type Sample struct {
	Row   SampleRow `json:"row"`
	Model string    `json:"model"`
	Judge string    `json:"judge"`
	// History is every earlier turn; Action the evaluated one's action.
	History []Turn `json:"history"`
	Action  string `json:"action"`
	// Prediction is what extraction kept of Generation; Truth the real
	// observation ("" when the record could not be read: RecordErr says
	// why).
	Prediction, Truth, Generation, Reasoning string
	RecordErr                                string
	// Scores, Strengths, Weaknesses and JudgeOutput are the judge's.
	Scores                *score.Scores
	Strengths, Weaknesses []string
	JudgeOutput           string
	// Rules are the offline rules scorer's scores and findings for the
	// same prediction (nil without the record).
	Rules         *score.Scores
	RuleFindings  []string
	Findings      []taxonomy.Finding
	Truncated     bool
	FinishReason  string
	JudgeAttempts int
}

// ComparePair is one sample of two runs side by side.
type ComparePair struct {
	Key    string `json:"key"`
	Domain string `json:"domain"`
	ID     string `json:"id"`
	Turn   int    `json:"turn"`
	// A and B are the two runs' totals (NaN when failed or absent); Delta
	// is B − A.
	A, B, Delta Num
	CatsA       []taxonomy.Category `json:"cats_a"`
	CatsB       []taxonomy.Category `json:"cats_b"`
}

// Comparison is one page of two runs' samples side by side.
type Comparison struct {
	A      RunInfo       `json:"a"`
	B      RunInfo       `json:"b"`
	Rows   []ComparePair `json:"rows"`
	Offset int           `json:"offset"`
	Total  int           `json:"total"`
	// Only counts samples one run has and the other lacks.
	OnlyA, OnlyB int
}

// Source reads runs. Names are those Runs lists.
type Source interface {
	Runs(ctx context.Context) ([]RunInfo, error)
	// Run returns a run's figures; labels (may be nil) feed its trust
	// report's agreement with people.
	Run(ctx context.Context, name string, labels []agree.Label) (*Run, error)
	Samples(ctx context.Context, name string, q Query) (*Page, error)
	Sample(ctx context.Context, name, key string) (*Sample, error)
	Compare(ctx context.Context, a, b string, q Query) (*Comparison, error)
	// Agree analyzes the judges of several runs together (typically the
	// same data under several models and judges), with labels.
	Agree(ctx context.Context, names []string, labels []agree.Label, o *agree.Options) (*agree.Report, error)
}
