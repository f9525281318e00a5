package judge

import (
	"fmt"

	"github.com/agentworld/agentworld/internal/score"
)

// ParseStrict reads a judge answer as [Parse] does, then requires every one
// of the five dimensions to be present and, as converted, within 1..5. The
// benchmark keeps the published leniency (a missing dimension is 0 and left
// out of the mean, a 7 is clamped to 5, a negative is kept); a reward must
// not: a verdict that leaves a dimension out or scores it outside the scale
// is an unusable answer, retried like an unparseable one (the error wraps
// [ErrUnparseable]) rather than averaged over the rest.
func ParseStrict(output string) (score.Scores, Verdict, error) {
	text := verdictText(output)
	obj, salvaged, err := decodeCandidate(text)
	if err != nil {
		return score.Scores{}, Verdict{}, err
	}
	dims, err := scoresOf(obj)
	if err != nil {
		return score.Scores{}, Verdict{}, err
	}
	var vals [5]int
	for i, name := range score.Dimensions {
		raw, ok := dims[name]
		if !ok {
			return score.Scores{}, Verdict{}, fmt.Errorf("%w: dimension %q is missing", ErrUnparseable, name)
		}
		n := dimensionRaw(raw)
		if n < 1 || n > 5 {
			return score.Scores{}, Verdict{}, fmt.Errorf("%w: dimension %q is %v, outside 1..5", ErrUnparseable, name, raw)
		}
		vals[i] = n
	}
	s := score.Scores{Format: vals[0], Factuality: vals[1], Consistency: vals[2], Realism: vals[3], Quality: vals[4]}
	var v Verdict
	if !salvaged {
		v.Strengths = stringList(obj["strengths"])
		v.Weaknesses = stringList(obj["weaknesses"])
	}
	return s, v, nil
}
