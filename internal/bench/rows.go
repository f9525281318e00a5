// Package bench runs AgentWorldBench: inference of a world model on the
// benchmark records, judging of its predictions, and scoring, as one
// concurrent, resumable, cached pipeline with reports.
//
// Size: over 3,000 lines because a run directory is one format that every
// part reads and writes: the pipeline (run.go, infer.go, judgestage.go,
// pairs.go) writes the predictions and judged rows, and the scorer,
// reports, comparisons, trust summary and the run viewer (view.go,
// viewindex.go) read exactly those rows (rows.go) and the run's settings
// (runmeta.go).
// The parts that need none of it have left: the answer cache
// (answercache), run views for the UI (runview), agreement statistics
// (agree), the error taxonomy (taxonomy).
package bench

import (
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Failure reasons a sample can carry; failed samples are excluded from the
// means (as published) and always counted beside a score.
const (
	FailNoGeneration    = "no_generation"     // the model returned empty text
	FailLength          = "length"            // cut by the token budget with nothing usable
	FailJudgeUnparsable = "judge_unparseable" // three judge attempts, none parsed
	FailTransport       = "transport"         // the model or judge endpoint kept failing
	FailInvalidRecord   = "invalid_record"    // the record cannot be evaluated (turn_idx out of range, …)
)

// Prediction is one line of predictions.jsonl: a record's generation with
// what it cost. Sample is the stable identity of the input row (content
// hash plus occurrence), because ids repeat in the published data.
type Prediction struct {
	Sample  string `json:"sample"`
	File    string `json:"file"`
	Line    int    `json:"line"`
	Task    string `json:"task"`
	Domain  string `json:"domain"`
	ID      string `json:"id"`
	TurnIdx int    `json:"turn_idx"`
	Model   string `json:"model"`
	// Generation is the raw content the model returned; Prediction is what
	// extraction made of it.
	Generation   string               `json:"generation"`
	Prediction   string               `json:"prediction"`
	Reasoning    string               `json:"reasoning_content,omitempty"`
	FinishReason string               `json:"finish_reason,omitempty"`
	Usage        *worldmodel.Response `json:"usage,omitempty"`
	Truncated    bool                 `json:"truncated,omitempty"`
	Failure      string               `json:"failure,omitempty"`
	Error        string               `json:"error,omitempty"`
}

// Scores are the five judge dimensions of one sample (see [score.Scores]).
type Scores = score.Scores

// Dimensions lists the five dimension names in report order.
var Dimensions = score.Dimensions

// Judged is one line of judged.jsonl: a prediction with its judgement.
type Judged struct {
	Prediction
	// Judge names what scored the sample: a model name, or "rules" for the
	// offline deterministic scorer (not the rubric judge).
	Judge string `json:"judge"`
	// GenericJudge is set when the domain was unknown and a generic judge
	// prompt was used.
	GenericJudge bool `json:"generic_judge,omitempty"`
	// JudgePrompts says which judge text an LLM judge was given (see
	// [score.JudgeText]): "agentworld (not the official text)" or the
	// official text's label with its digest. Empty for the rules scorer
	// (and in rows of older writers, which used agentworld's text).
	JudgePrompts string   `json:"judge_prompts,omitempty"`
	JudgeOutput  string   `json:"judge_output,omitempty"`
	Scores       *Scores  `json:"scores,omitempty"`
	Total        float64  `json:"total"`
	Strengths    []string `json:"strengths,omitempty"`
	Weaknesses   []string `json:"weaknesses,omitempty"`
	Attempts     int      `json:"judge_attempts,omitempty"`
	// JudgeMode is the pairwise mode the row was judged in ("turing",
	// "reference"); empty for pointwise. Pair holds its judgments.
	JudgeMode string       `json:"judge_mode,omitempty"`
	Pair      *PairVerdict `json:"pair,omitempty"`
}

// Valid reports whether the sample counts in the means.
func (j *Judged) Valid() bool { return j.Failure == "" && j.Scores != nil }
