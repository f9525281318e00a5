package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentworld/agentworld/internal/answercache"
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
	prompts string
	// mode is the judge mode; pair answers the pairwise modes, with
	// reference predictions by sample in reference mode, and both asks each
	// pair in both orders; seed decides the turing order.
	mode      string
	pair      PairRubric
	refs      map[string]*Prediction
	both      bool
	seed      uint64
	settings  JudgeSettings
	cache     *answercache.Cache
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
	if jd.mode != ModePointwise {
		return jd.judgePair(ctx, rec, p, j)
	}
	msgs, generic := jd.rubric.Messages(rec, p.Prediction)
	j.GenericJudge = generic
	var v Verdict
	a, err := jd.ask(ctx, msgs, func(out string) (err error) {
		v, err = jd.rubric.Parse(out)
		return err
	})
	if err != nil {
		return j, err
	}
	j.Attempts, j.JudgeOutput = a.attempts, a.output
	if a.ok {
		j.setVerdict(v)
		return j, nil
	}
	j.Failure, j.Error = a.failure(jd, p)
	return j, nil
}

// answer is what asking the judge one question came to.
type answer struct {
	// output is the last answer received (the accepted one when ok).
	output string
	// attempts counts the calls made (0 when the cache answered).
	attempts  int
	ok        bool
	transport bool // the last attempt failed on the endpoint, not the parse
	lastErr   error
}

// ask puts one conversation to the judge: a cached answer that parses is
// used as is; otherwise up to jd.attempts calls, a transport error waiting
// before the next, a parse failure retrying at once. An answer that parses
// and was not cut by the token budget is cached. Only the cancellation of
// ctx is returned as an error.
func (jd *judger) ask(ctx context.Context, msgs []worldmodel.Message, parse func(string) error) (answer, error) {
	req := jd.settings.request(msgs)
	key := jd.cache.Key(req, jd.name)
	if resp, ok := jd.cache.Get(key); ok {
		if parse(resp.Content) == nil {
			return answer{output: resp.Content, ok: true}, nil
		}
	}
	var a answer
	for attempt := 1; attempt <= jd.attempts; attempt++ {
		a.attempts = attempt
		resp, err := jd.model.Complete(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return a, ctx.Err()
			}
			a.lastErr, a.transport = err, true
			// The client already retried with backoff; wait once more before
			// the next judge attempt.
			if attempt < jd.attempts {
				t := time.NewTimer(jd.retryWait * time.Duration(attempt))
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return a, ctx.Err()
				}
			}
			continue
		}
		a.transport = false
		a.output = resp.Content
		if err := parse(resp.Content); err != nil {
			a.lastErr = err
			continue // a parse failure retries at once
		}
		if !resp.Truncated() {
			jd.cache.Put(key, resp)
		}
		a.ok = true
		return a, nil
	}
	return a, nil
}

// failure is the reason and message of a question that never got a
// parseable answer.
func (a answer) failure(jd *judger, p Prediction) (reason, msg string) {
	where := fmt.Sprintf("judge %s: sample %s (%s:%d, task %q id %s turn %d)", jd.name, p.Sample, p.File, p.Line, p.Task, p.ID, p.TurnIdx)
	if a.transport {
		return FailTransport, fmt.Sprintf("%s: %d attempts failed: %v", where, jd.attempts, a.lastErr)
	}
	return FailJudgeUnparsable, fmt.Sprintf("%s: no parseable verdict in %d attempts: %v", where, jd.attempts, a.lastErr)
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
