// Package score is the small vocabulary of judging that the benchmark, the
// judges and the real-environment comparison share: the five rubric
// dimensions of one prediction ([Scores]) and a judge's conclusion
// ([Verdict]). It is a leaf so that capability packages such as judge and
// realenv can speak it without importing the benchmark pipeline.
package score

// Scores are the five judge dimensions of one sample, 0 meaning absent or
// unusable, otherwise 1..5 (negatives kept as the published script does).
type Scores struct {
	Format      int `json:"format"`
	Factuality  int `json:"factuality"`
	Consistency int `json:"consistency"`
	Realism     int `json:"realism"`
	Quality     int `json:"quality"`
}

// Dimensions lists the five dimension names in report order.
var Dimensions = []string{"format", "factuality", "consistency", "realism", "quality"}

// Values returns the dimensions in [Dimensions] order.
func (s Scores) Values() [5]int {
	return [5]int{s.Format, s.Factuality, s.Consistency, s.Realism, s.Quality}
}

// Total is the sample total as published: the mean of the dimensions above
// 0, or 0 when none is.
func (s Scores) Total() float64 {
	sum, n := 0, 0
	for _, v := range s.Values() {
		if v > 0 {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// Verdict is what a judge concluded about one prediction: its scores and
// the prose it gave beside them.
type Verdict struct {
	Scores     Scores
	Strengths  []string
	Weaknesses []string
}

// RulesJudgeName marks results scored by the offline deterministic scorer
// (judge.Rules), which is not the rubric judge.
const RulesJudgeName = "rules"

// OwnPromptsLabel is what every run, report and reward result judged with
// agentworld's own judge text says about its prompts.
const OwnPromptsLabel = "agentworld (not the official text)"

// PromptFile is one file the judge's text was read from, with its SHA-256
// (lower-case hex).
type PromptFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// JudgeText says which text a rubric judge was given: agentworld's own, or
// the official one read from a checkout (with the files and their digests).
// Runs judged with different texts are not comparable.
type JudgeText struct {
	// Label says it in words: "agentworld (not the official text)" or
	// "official (sha256 …, as at cd0aa83)".
	Label string `json:"label"`
	// Digest is one SHA-256 over Files; empty for agentworld's text.
	Digest string `json:"digest,omitempty"`
	// Files are the official files read, sorted by path.
	Files []PromptFile `json:"files,omitempty"`
	// Unpinned lists the files whose digest differs from the official
	// commit's pinned one.
	Unpinned []string `json:"unpinned,omitempty"`
}
