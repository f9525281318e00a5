package judge

import (
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Rubric plugs the published judge conversation and parsing into a judging
// pipeline (the benchmark's Rubric interface, the reward's rubric
// component); judge itself depends on neither.
type Rubric struct{}

// RuleScorer plugs the offline rules scorer into a judging pipeline (the
// benchmark's RuleJudge interface); results it scores are marked with
// RulesJudge.
type RuleScorer struct{}

// Messages builds the judge conversation and says whether the generic
// prompt was used because the record's domain is unknown.
func (Rubric) Messages(rec *trajectory.Record, prediction string) ([]worldmodel.Message, bool) {
	_, generic := SystemPrompt(rec.Domain())
	return Messages(rec, prediction), generic
}

// Parse reads one judge answer; an error wraps ErrUnparseable.
func (Rubric) Parse(output string) (score.Verdict, error) {
	s, v, err := Parse(output)
	if err != nil {
		return score.Verdict{}, err
	}
	return score.Verdict{Scores: s, Strengths: v.Strengths, Weaknesses: v.Weaknesses}, nil
}

// Rules scores a prediction with the deterministic checks of Rules.
func (RuleScorer) Rules(rec *trajectory.Record, prediction string) score.Verdict {
	s, v := Rules(rec, prediction)
	return score.Verdict{Scores: s, Strengths: v.Strengths, Weaknesses: v.Weaknesses}
}
