package judge

import (
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Rubric plugs the published judge conversation and parsing into the bench
// pipeline (bench.Rubric), which keeps bench free of a dependency on judge.
type Rubric struct{}

// RuleScorer plugs the offline rules scorer into the bench pipeline
// (bench.RuleJudge); rows it scores are marked with RulesJudge.
type RuleScorer struct{}

var (
	_ bench.Rubric    = Rubric{}
	_ bench.RuleJudge = RuleScorer{}
)

// Messages builds the judge conversation and says whether the generic
// prompt was used because the record's domain is unknown.
func (Rubric) Messages(rec *trajectory.Record, prediction string) ([]worldmodel.Message, bool) {
	_, generic := SystemPrompt(rec.Domain())
	return Messages(rec, prediction), generic
}

// Parse reads one judge answer; an error wraps ErrUnparseable.
func (Rubric) Parse(output string) (bench.Verdict, error) {
	s, v, err := Parse(output)
	if err != nil {
		return bench.Verdict{}, err
	}
	return bench.Verdict{Scores: s, Strengths: v.Strengths, Weaknesses: v.Weaknesses}, nil
}

// Rules scores a prediction with the deterministic checks of Rules.
func (RuleScorer) Rules(rec *trajectory.Record, prediction string) bench.Verdict {
	s, v := Rules(rec, prediction)
	return bench.Verdict{Scores: s, Strengths: v.Strengths, Weaknesses: v.Weaknesses}
}
