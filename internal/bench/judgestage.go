package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Verdict is what a judge concluded about one prediction (see
// [score.Verdict]).
type Verdict = score.Verdict

// Rubric is the LLM judge's side of judging: the judge
// conversation and the parsing of its answer. The judge package provides it;
// the bench package only drives it (keeping the dependency one-way).
type Rubric interface {
	// Messages builds the judge conversation for a prediction; generic
	// reports that the record's domain is unknown and a generic judge prompt
	// was used.
	Messages(rec *trajectory.Record, prediction string) (msgs []worldmodel.Message, generic bool)
	// Parse reads the verdict out of a judge output; an error means the
	// attempt failed and is retried.
	Parse(output string) (Verdict, error)
}

// RuleJudge scores a prediction offline with deterministic checks (the
// "rules" judge: not the rubric judge, and marked as such in every row).
type RuleJudge interface {
	Rules(rec *trajectory.Record, prediction string) Verdict
}

// JudgeSettings are the judge's generation parameters; all are optional and
// only sent when set.
type JudgeSettings struct {
	// MaxTokens is the judge's budget; 0 sends none.
	MaxTokens           int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens bool           `json:"max_completion_tokens,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	TopP                *float64       `json:"top_p,omitempty"`
	Seed                *int64         `json:"seed,omitempty"`
	Extra               map[string]any `json:"extra_body,omitempty"`
}

func (s JudgeSettings) request(msgs []worldmodel.Message) worldmodel.Request {
	req := worldmodel.Request{Messages: msgs, MaxCompletionTokens: s.MaxCompletionTokens, Temperature: s.Temperature, TopP: s.TopP, Seed: s.Seed, Extra: s.Extra}
	if s.MaxTokens > 0 {
		req.MaxTokens = s.MaxTokens
	}
	return req
}

// DefaultJudgeAttempts is the published number of judge attempts per sample.
const DefaultJudgeAttempts = 3

// judger scores predictions with an LLM judge or the rules.
type judger struct {
	// name is recorded in every row ("rules" for the offline scorer).
	name   string
	model  worldmodel.Completer // nil with rules
	rubric Rubric
	rules  RuleJudge
	// prompts labels the judge text in every row (not for rules).
	prompts   string
	settings  JudgeSettings
	cache     *Cache
	attempts  int
	retryWait time.Duration
}

// RulesJudgeName marks rows scored by the offline deterministic scorer.
const RulesJudgeName = score.RulesJudgeName

// judge produces the judged row of one prediction. A failed prediction is
// passed through unjudged; judging failures become failed rows; only
// cancellation of ctx is returned as an error.
func (jd *judger) judge(ctx context.Context, rec *trajectory.Record, p Prediction) (Judged, error) {
	j := Judged{Prediction: p, Judge: jd.name}
	if p.Failure != "" {
		return j, nil
	}
	if rec == nil {
		j.Failure, j.Error = FailInvalidRecord, fmt.Sprintf("sample %s (%s:%d): record not found in the data", p.Sample, p.File, p.Line)
		return j, nil
	}
	if jd.rules != nil {
		v := jd.rules.Rules(rec, p.Prediction)
		j.setVerdict(v)
		return j, nil
	}
	j.JudgePrompts = jd.prompts
	msgs, generic := jd.rubric.Messages(rec, p.Prediction)
	j.GenericJudge = generic
	req := jd.settings.request(msgs)
	key := jd.cache.Key(req, jd.name)
	if resp, ok := jd.cache.Get(key); ok {
		if v, err := jd.rubric.Parse(resp.Content); err == nil {
			j.JudgeOutput = resp.Content
			j.setVerdict(v)
			return j, nil
		}
	}
	var lastErr error
	transport := false
	for attempt := 1; attempt <= jd.attempts; attempt++ {
		j.Attempts = attempt
		resp, err := jd.model.Complete(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return j, ctx.Err()
			}
			lastErr, transport = err, true
			// The client already retried with backoff; wait once more before
			// the next judge attempt.
			if attempt < jd.attempts {
				t := time.NewTimer(jd.retryWait * time.Duration(attempt))
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return j, ctx.Err()
				}
			}
			continue
		}
		transport = false
		j.JudgeOutput = resp.Content
		v, err := jd.rubric.Parse(resp.Content)
		if err != nil {
			lastErr = err
			continue // a parse failure retries at once
		}
		if !resp.Truncated() {
			jd.cache.Put(key, resp)
		}
		j.setVerdict(v)
		return j, nil
	}
	where := fmt.Sprintf("judge %s: sample %s (%s:%d, task %q id %s turn %d)", jd.name, p.Sample, p.File, p.Line, p.Task, p.ID, p.TurnIdx)
	if transport {
		j.Failure = FailTransport
		j.Error = fmt.Sprintf("%s: %d attempts failed: %v", where, jd.attempts, lastErr)
	} else {
		j.Failure = FailJudgeUnparsable
		j.Error = fmt.Sprintf("%s: no parseable verdict in %d attempts: %v", where, jd.attempts, lastErr)
	}
	return j, nil
}

func (j *Judged) setVerdict(v Verdict) {
	s := v.Scores
	j.Scores = &s
	j.Total = s.Total()
	j.Strengths = v.Strengths
	j.Weaknesses = v.Weaknesses
}

// errStop is returned by walk callbacks to end a walk early on purpose.
var errStop = errors.New("stop")
