package judge

import (
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Rubric plugs the judge conversation and parsing into a judging pipeline
// (the benchmark's Rubric and PairRubric interfaces, the reward's rubric
// component); judge itself depends on neither. Prompts nil means
// agentworld's own text.
type Rubric struct {
	Prompts *Prompts
}

// RuleScorer plugs the offline rules scorer into a judging pipeline (the
// benchmark's RuleJudge interface); results it scores are marked with
// RulesJudge.
type RuleScorer struct{}

// Messages builds the pointwise judge conversation ([Messages]) and says
// whether the record's domain is unknown.
func (r Rubric) Messages(rec *trajectory.Record, prediction string) ([]worldmodel.Message, bool) {
	return Messages(r.Prompts, rec, prediction)
}

// PairMessages builds the conversation of a pairwise mode ("turing" or
// "reference"; [PairMessages]).
func (r Rubric) PairMessages(mode string, rec *trajectory.Record, a, b string) ([]worldmodel.Message, bool) {
	return PairMessages(r.Prompts, Mode(mode), rec, a, b)
}

// Parse reads one judge answer; an error wraps ErrUnparseable.
func (Rubric) Parse(output string) (score.Verdict, error) {
	s, v, err := Parse(output)
	if err != nil {
		return score.Verdict{}, err
	}
	return score.Verdict{Scores: s, Strengths: v.Strengths, Weaknesses: v.Weaknesses}, nil
}

// ParseChoice reads a pairwise answer, "A" or "B" ([ParseChoice]).
func (Rubric) ParseChoice(output string) (string, error) { return ParseChoice(output) }

// Text says which judge text the rubric uses.
func (r Rubric) Text() score.JudgeText { return r.Prompts.Text() }

// Rules scores a prediction with the deterministic checks of Rules.
func (RuleScorer) Rules(rec *trajectory.Record, prediction string) score.Verdict {
	s, v := Rules(rec, prediction)
	return score.Verdict{Scores: s, Strengths: v.Strengths, Weaknesses: v.Weaknesses}
}
