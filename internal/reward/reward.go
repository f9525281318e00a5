package reward

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Policy says what happens to an item whose judge never gave a parseable
// verdict (or kept failing) after every attempt.
type Policy string

// The judge-failure policies. Each such item is counted in [Stats] and
// carries its reason; none becomes a silent 0.
const (
	// PolicyRules scores the rubric with the offline rules scorer
	// (judge.Rules) instead, marked in Result.Judge.Fallback.
	PolicyRules Policy = "rules"
	// PolicyZero gives the rubric component 0, with a reason.
	PolicyZero Policy = "zero"
	// PolicyDrop drops the item: Result.Dropped is set and Score is null;
	// the caller leaves it out of the update.
	PolicyDrop Policy = "drop"
)

// ManipulationRubric is the rubric of a prediction that addresses the
// grader: the floor of the rubric range (every dimension 1, × 5).
const ManipulationRubric = 5

// Mix modes.
const (
	// MixWeighted scores rubric·w + rule·(1−w) for every item.
	MixWeighted = "weighted"
	// MixSample uses the rule component alone for a seeded share of the
	// items (the rule weight) and the rubric alone for the rest.
	MixSample = "sample"
)

// Options tune a [Scorer]; nil means every default.
type Options struct {
	// Judge answers the rubric judge conversations. nil means no LLM judge:
	// the rubric is scored by the offline rules scorer (judge.Rules), and
	// every result says so (judge.model "rules") — useful for trying the
	// pipeline, not comparable with a model judge.
	Judge worldmodel.Completer
	// JudgeModel names the judge model (cache key, family check, reports);
	// "" is allowed only without Judge.
	JudgeModel string
	// PolicyModel names the policy under training; "" skips the family
	// check.
	PolicyModel string
	// AllowSameFamily lets a judge of the policy's family score it; false
	// (the default) makes New fail with ErrSameFamily.
	AllowSameFamily bool
	// RubricWeight and RuleWeight mix the components; both 0 means 0.9 and
	// 0.1 (the published 9 : 1). They must sum to 1, so the score stays in
	// the components' [0, 25] and a threshold on it keeps its meaning
	// (New refuses otherwise, with ErrWeights); in sample mode the rule is
	// drawn with probability RuleWeight.
	RubricWeight, RuleWeight float64
	// Mix is MixWeighted or MixSample; "" means MixWeighted.
	Mix string
	// Seed makes MixSample's draws reproducible; each item's draw depends
	// only on the seed and the item's content.
	Seed uint64
	// OnJudgeFailure is the policy for an item whose judge never parses;
	// "" means PolicyRules.
	OnJudgeFailure Policy
	// RequireTag scores 0 (with a reason) a generation without a
	// <predicted_observation> tag; false (the default) follows the
	// published extraction, which falls back to the cleaned text.
	RequireTag bool
	// Attempts per judge sample, as published: a transport error waits
	// and retries, a parse failure retries at once; 0 means 3.
	Attempts int
	// RetryWait is the wait after a transport error, times the attempt
	// number; 0 means 1 second.
	RetryWait time.Duration
	// Samples is how many judge samples an item gets (k); their spread is
	// reported as a confidence; 0 means 1.
	Samples int
	// MaxTokens and Temperature are sent to the judge when set.
	MaxTokens   int
	Temperature *float64
	// MaxConcurrency bounds the judge calls in flight; 0 means 16.
	MaxConcurrency int
	// Rate bounds judge calls per second; 0 means unbounded. Burst is the
	// limiter's burst; 0 means MaxConcurrency.
	Rate  float64
	Burst int
	// CacheSize bounds the judge answers kept in memory; 0 means 65536,
	// negative turns the cache off.
	CacheSize int
	// OnJudgeCall, when set, is told every judge call's latency and error
	// (for metrics).
	OnJudgeCall func(d time.Duration, err error)
	// Prompts is the rubric judge's text; nil means agentworld's own (not
	// the official text), which every result then says (judge.prompts).
	Prompts *judge.Prompts
	// Logger receives judge failures; nil discards.
	Logger *slog.Logger
}

// Scorer computes hybrid rewards; it is safe for concurrent use.
type Scorer struct {
	o       Options
	sem     chan struct{}
	lim     *rate.Limiter
	cache   *answerCache
	log     *slog.Logger
	stats   counters
	ruleP   float64 // probability of drawing the rule in sample mode
	version sync.Map
}

// ErrWeights marks a rubric and rule weight that are not a mix: each must
// be in [0, 1] and the two must sum to 1.
var ErrWeights = errors.New("the rubric and rule weights must each be in [0, 1] and sum to 1")

// weightSlack is how far from 1 a sum of two decimal weights may land by
// rounding alone (0.7 + 0.3 is 0.9999999999999999).
const weightSlack = 1e-9

// CheckWeights checks a rubric and rule weight pair (both 0 is the
// default, 0.9 and 0.1).
func CheckWeights(rubric, rule float64) error {
	if rubric == 0 && rule == 0 {
		return nil
	}
	sum := rubric + rule
	if rubric < 0 || rule < 0 || math.IsNaN(sum) || math.IsInf(sum, 0) || math.Abs(sum-1) > weightSlack {
		return fmt.Errorf("%w: rubric %v + rule %v = %v", ErrWeights, rubric, rule, sum)
	}
	return nil
}

// New checks the options and makes a scorer.
func New(opts *Options) (*Scorer, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.RubricWeight == 0 && o.RuleWeight == 0 {
		o.RubricWeight, o.RuleWeight = 0.9, 0.1
	}
	if err := CheckWeights(o.RubricWeight, o.RuleWeight); err != nil {
		return nil, err
	}
	switch o.Mix {
	case "":
		o.Mix = MixWeighted
	case MixWeighted, MixSample:
	default:
		return nil, fmt.Errorf("reward mix %q: want %q or %q", o.Mix, MixWeighted, MixSample)
	}
	switch o.OnJudgeFailure {
	case "":
		o.OnJudgeFailure = PolicyRules
	case PolicyRules, PolicyZero, PolicyDrop:
	default:
		return nil, fmt.Errorf("judge failure policy %q: want %q, %q or %q", o.OnJudgeFailure, PolicyRules, PolicyZero, PolicyDrop)
	}
	if o.Judge != nil && o.JudgeModel == "" {
		return nil, errors.New("reward: a judge needs its model name (JudgeModel)")
	}
	if o.Judge == nil {
		o.JudgeModel = score.RulesJudgeName
	}
	if err := checkFamilies(o.JudgeModel, o.PolicyModel, o.AllowSameFamily || o.Judge == nil); err != nil {
		return nil, err
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.RetryWait <= 0 {
		o.RetryWait = time.Second
	}
	if o.Samples <= 0 {
		o.Samples = 1
	}
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = 16
	}
	if o.CacheSize == 0 {
		o.CacheSize = 1 << 16
	}
	s := &Scorer{
		o:     o,
		sem:   make(chan struct{}, o.MaxConcurrency),
		cache: newAnswerCache(o.CacheSize),
		log:   o.Logger,
		ruleP: o.RuleWeight,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if o.Rate > 0 {
		burst := o.Burst
		if burst <= 0 {
			burst = o.MaxConcurrency
		}
		s.lim = rate.NewLimiter(rate.Limit(o.Rate), burst)
	}
	return s, nil
}

// JudgeModel is the name results report as their judge.
func (s *Scorer) JudgeModel() string { return s.o.JudgeModel }

// Result is the reward of one item with every component.
type Result struct {
	ID      string `json:"id"`
	GroupID string `json:"group_id,omitempty"`
	// Score is the mixed reward in [0, 25]; null when the item was dropped.
	Score      *float64   `json:"score"`
	Components Components `json:"components"`
	Judge      JudgeInfo  `json:"judge"`
	// Dropped is set when the judge-failure policy dropped the item.
	Dropped bool `json:"dropped,omitempty"`
	// Manipulation is set when the prediction addresses the grader or
	// praises itself (judge.Manipulation): it is not judged, its rubric is
	// the floor of the range (ManipulationRubric) and its rule 0.
	Manipulation bool `json:"manipulation,omitempty"`
	// Reason says why a component is 0 or missing, or why the item was
	// dropped; "" when nothing went wrong.
	Reason string `json:"reason,omitempty"`
}

// Value is the score as a number for trainers that need one: 0 for a
// dropped item (whose Dropped and Reason say so).
func (r *Result) Value() float64 {
	if r.Score == nil {
		return 0
	}
	return *r.Score
}

// Components are the parts of a reward; each is always reported.
type Components struct {
	// RubricDims are the judge's five dimensions (the mean over the judge
	// samples); absent when the rubric was not judged.
	RubricDims map[string]float64 `json:"rubric_dims,omitempty"`
	// Rubric is the mean dimension × 5, in [5, 25]; 0 when there is no
	// answer to judge or the failure policy zeroed it.
	Rubric float64 `json:"rubric"`
	// Rule is 25 when every rule check passes, else 0.
	Rule       float64 `json:"rule"`
	RuleChecks []Check `json:"rule_checks,omitempty"`
	// Mix says how Score was made: "weighted", "sample:rubric" or
	// "sample:rule".
	Mix string `json:"mix"`
}

// JudgeInfo describes the rubric judging of an item.
type JudgeInfo struct {
	Model         string `json:"model"`
	RubricVersion string `json:"rubric_version"`
	// Prompts says which judge text was used: "agentworld (not the
	// official text)" or the official text's label (judge.Prompts.Label).
	Prompts  string `json:"prompts"`
	ParseOK  bool   `json:"parse_ok"`
	Attempts int    `json:"attempts"`
	// Samples is how many judge samples parsed; Spread is the range (max −
	// min) of their rubric values, the confidence of the rubric.
	Samples int     `json:"samples,omitempty"`
	Spread  float64 `json:"spread,omitempty"`
	Cached  bool    `json:"cached,omitempty"`
	// Failed is set when the judge never gave a parseable verdict; the
	// failure policy then decided the rubric.
	Failed bool `json:"failed,omitempty"`
	// Fallback names the scorer used when the judge failed ("rules").
	Fallback string `json:"fallback,omitempty"`
	// Generic is set when the domain is unknown and the generic judge
	// prompt was used.
	Generic bool `json:"generic,omitempty"`
}

// Prompts is the rubric judge's text (nil: agentworld's own).
func (s *Scorer) Prompts() *judge.Prompts { return s.o.Prompts }

// Score computes the reward of one item. It never fails: an item that
// cannot be scored gets 0 (or is dropped) with a reason. Only the
// cancellation of ctx ends it early, with a reason saying so.
func (s *Scorer) Score(ctx context.Context, it Item) Result {
	s.stats.items.Add(1)
	r := Result{ID: it.ID, GroupID: it.GroupID}
	r.Judge.Model = s.o.JudgeModel
	r.Judge.Prompts = s.o.Prompts.Label()
	d := it.Domain()
	r.Judge.RubricVersion = s.rubricVersion(d)
	if s.o.Judge == nil {
		r.Judge.RubricVersion = score.RulesJudgeName
	}
	rec, err := it.record()
	if err != nil {
		s.stats.invalid.Add(1)
		return s.finish(r, it, err.Error())
	}
	truth := rec.GroundTruth()
	if _, tagged := conversation.LastTagContent(conversation.StripThinking(it.Response)); !tagged && s.o.RequireTag {
		s.stats.noAnswer.Add(1)
		return s.finish(r, it, "no answer: no <predicted_observation> tag in the response")
	}
	pred := conversation.ExtractPrediction(it.Response)
	if pred == conversation.NoOutput {
		s.stats.noAnswer.Add(1)
		return s.finish(r, it, "no answer: the response holds nothing once thinking is removed")
	}
	action := rec.CurrentPrompt
	if action == "" {
		action = rec.Prompt[rec.TurnIdx-1]
	}
	pass, checks := Rule(d, action, pred, truth)
	r.Components.RuleChecks = checks
	if pass {
		r.Components.Rule = RuleScale
	}
	reason := ""
	if why, text := judge.Manipulation(pred, truth); why != "" {
		// Not judged: a judge may be swayed by exactly this text. The
		// rubric gets the worst verdict the scale has, never below it, and
		// the rule fails, so no manipulation can score above an honest
		// wrong answer.
		s.stats.manipulation.Add(1)
		r.Manipulation = true
		r.Components.Rubric, r.Components.Rule = ManipulationRubric, 0
		reason = fmt.Sprintf("manipulation: the prediction %s (%q); rubric at the floor (%d), rule 0", why, text, ManipulationRubric)
	} else {
		var drop bool
		reason, drop = s.rubric(ctx, &r, rec, pred)
		if drop {
			r.Dropped, r.Reason, r.Components.Mix = true, reason, s.o.Mix
			return r
		}
	}
	return s.finish(r, it, reason)
}

// finish mixes the components into the score.
func (s *Scorer) finish(r Result, it Item, reason string) Result {
	r.Reason = reason
	c := &r.Components
	var v float64
	switch s.o.Mix {
	case MixSample:
		if s.drawRule(it) {
			c.Mix, v = "sample:rule", c.Rule
		} else {
			c.Mix, v = "sample:rubric", c.Rubric
		}
	default:
		c.Mix = MixWeighted
		v = s.o.RubricWeight*c.Rubric + s.o.RuleWeight*c.Rule
	}
	r.Score = &v
	return r
}

// drawRule decides, reproducibly, whether an item's reward is its rule
// component in sample mode: the draw hashes the seed with the item's id and
// response, so scoring the same item again draws the same.
func (s *Scorer) drawRule(it Item) bool {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], s.o.Seed)
	h.Write(b[:])
	h.Write([]byte(it.ID))
	h.Write([]byte{0})
	h.Write([]byte(it.Response))
	sum := h.Sum(nil)
	u := float64(binary.LittleEndian.Uint64(sum[:8])>>11) / (1 << 53)
	return u < s.ruleP
}

// rubricVersion names the judge conversation of a domain: a hash of its
// system prompt and instructions, so cached verdicts never outlive a change
// of the rubric.
func (s *Scorer) rubricVersion(d domain.Domain) string {
	if v, ok := s.version.Load(d); ok {
		return v.(string)
	}
	msgs, _ := judge.Messages(s.o.Prompts, &trajectory.Record{Task: string(d), TurnIdx: 1, Prompt: []string{""}, Response: []string{""}}, "")
	h := sha256.New()
	for _, m := range msgs {
		h.Write([]byte(m.Role))
		h.Write([]byte{0})
		h.Write([]byte(m.Content))
		h.Write([]byte{0})
	}
	v := "judge-v1-" + hex.EncodeToString(h.Sum(nil))[:12]
	s.version.Store(d, v)
	return v
}

// rubric fills the rubric component. When the judge failed it applies the
// failure policy and returns the reason, with drop set when the item is to
// be dropped (the drop policy, or ctx cancelled).
func (s *Scorer) rubric(ctx context.Context, r *Result, rec *trajectory.Record, pred string) (reason string, drop bool) {
	_, r.Judge.Generic = s.o.Prompts.System(judge.Pointwise, rec.Task)
	if s.o.Judge == nil {
		sc, _ := judge.Rules(rec, pred)
		s.setRubric(r, []score.Scores{sc})
		r.Judge.ParseOK, r.Judge.Samples = true, 1
		return "", false
	}
	msgs, _ := judge.Messages(s.o.Prompts, rec, pred)
	var got []score.Scores
	var lastErr error
	for k := 0; k < s.o.Samples; k++ {
		sc, attempts, cached, err := s.judgeOnce(ctx, msgs, k)
		r.Judge.Attempts += attempts
		r.Judge.Cached = r.Judge.Cached || cached
		if err != nil {
			lastErr = err
			if ctx.Err() != nil {
				s.stats.dropped.Add(1)
				return "cancelled before the judge answered: " + ctx.Err().Error(), true
			}
			continue
		}
		got = append(got, sc)
	}
	if len(got) > 0 {
		s.setRubric(r, got)
		r.Judge.ParseOK, r.Judge.Samples = true, len(got)
		return "", false
	}
	s.stats.judgeFailed.Add(1)
	r.Judge.Failed = true
	why := fmt.Sprintf("judge %s failed after %d attempts: %v", s.o.JudgeModel, r.Judge.Attempts, lastErr)
	s.log.Warn("judge failed", "id", r.ID, "policy", string(s.o.OnJudgeFailure), "err", lastErr)
	switch s.o.OnJudgeFailure {
	case PolicyDrop:
		s.stats.dropped.Add(1)
		return why + "; item dropped", true
	case PolicyZero:
		s.stats.zeroed.Add(1)
		return why + "; rubric scored 0", false
	default:
		s.stats.fallback.Add(1)
		sc, _ := judge.Rules(rec, pred)
		s.setRubric(r, []score.Scores{sc})
		r.Judge.Fallback = score.RulesJudgeName
		return why + "; rubric from the offline rules scorer", false
	}
}

// setRubric averages the judge samples into the rubric component and their
// spread into the confidence.
func (s *Scorer) setRubric(r *Result, samples []score.Scores) {
	c := &r.Components
	dims := map[string]float64{}
	lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
	for _, sc := range samples {
		for i, v := range sc.Values() {
			dims[score.Dimensions[i]] += float64(v) / float64(len(samples))
		}
		t := rubricValue(sc)
		sum += t
		lo, hi = min(lo, t), max(hi, t)
	}
	c.RubricDims = dims
	c.Rubric = sum / float64(len(samples))
	r.Judge.Spread = hi - lo
}

// rubricValue is the published rubric reward of one verdict: the mean of
// its five dimensions × 5, in [5, 25]. A judge verdict has all five in
// 1..5 (judge.ParseStrict); the clamp holds the range for the offline
// rules scorer's verdicts too.
func rubricValue(sc score.Scores) float64 {
	return min(max(sc.Total(), 1), 5) * 5
}

// judgeOnce gets one parsed judge verdict (sample k), from the cache or in
// up to Attempts calls.
func (s *Scorer) judgeOnce(ctx context.Context, msgs []worldmodel.Message, k int) (sc score.Scores, attempts int, cached bool, err error) {
	req := worldmodel.Request{Messages: msgs, MaxTokens: s.o.MaxTokens, Temperature: s.o.Temperature}
	if s.o.Samples > 1 {
		seed := int64(k)
		req.Seed = &seed
	}
	// The request holds the rubric (system prompt and instructions), the
	// context, the prediction and the ground truth; with the judge model
	// its hash is the content key of the verdict.
	key := req.Hash(s.o.JudgeModel)
	if content, ok := s.cache.get(key); ok {
		if sc, _, err := judge.ParseStrict(content); err == nil {
			s.stats.cacheHits.Add(1)
			return sc, 0, true, nil
		}
	}
	for attempt := 1; attempt <= s.o.Attempts; attempt++ {
		attempts = attempt
		resp, cerr := s.call(ctx, req)
		if cerr != nil {
			err = cerr
			if ctx.Err() != nil {
				return sc, attempts, false, ctx.Err()
			}
			if attempt < s.o.Attempts {
				t := time.NewTimer(s.o.RetryWait * time.Duration(attempt))
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return sc, attempts, false, ctx.Err()
				}
			}
			continue
		}
		// A verdict missing a dimension or scoring one outside 1..5 is
		// as unusable as one that does not parse: averaging the rest
		// would move the reward out of its range or off its meaning.
		parsed, _, perr := judge.ParseStrict(resp.Content)
		if perr != nil {
			s.stats.judgeUnparsed.Add(1)
			err = perr
			continue // a parse failure retries at once, as published
		}
		if !resp.Truncated() {
			s.cache.put(key, resp.Content)
		}
		return parsed, attempts, false, nil
	}
	return sc, attempts, false, err
}

// call makes one judge call within the concurrency and rate bounds.
func (s *Scorer) call(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.sem }()
	if s.lim != nil {
		if err := s.lim.Wait(ctx); err != nil {
			return nil, err
		}
	}
	n := s.stats.inFlight.Add(1)
	for {
		m := s.stats.maxInFlight.Load()
		if n <= m || s.stats.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	start := time.Now()
	resp, err := s.o.Judge.Complete(ctx, req)
	s.stats.inFlight.Add(-1)
	s.stats.judgeCalls.Add(1)
	if err != nil {
		s.stats.judgeErrors.Add(1)
	}
	if s.o.OnJudgeCall != nil {
		s.o.OnJudgeCall(time.Since(start), err)
	}
	return resp, err
}

// ScoreBatch scores items concurrently (judge calls stay within the
// scorer's bounds) and returns their results in order.
func (s *Scorer) ScoreBatch(ctx context.Context, items []Item) []Result {
	out := make([]Result, len(items))
	var wg sync.WaitGroup
	for i := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = s.Score(ctx, items[i])
		}()
	}
	wg.Wait()
	return out
}

// counters are the scorer's running totals.
type counters struct {
	items, invalid, noAnswer, manipulation            atomic.Int64
	judgeCalls, judgeErrors, judgeUnparsed, cacheHits atomic.Int64
	judgeFailed, fallback, zeroed, dropped            atomic.Int64
	inFlight, maxInFlight                             atomic.Int64
}

// Stats are a scorer's running totals.
type Stats struct {
	Items        int64 `json:"items"`
	Invalid      int64 `json:"invalid"`
	NoAnswer     int64 `json:"no_answer"`
	Manipulation int64 `json:"manipulation"`
	// JudgeCalls counts calls made; JudgeErrors those that failed in
	// transport; JudgeUnparsed answers that did not parse.
	JudgeCalls    int64 `json:"judge_calls"`
	JudgeErrors   int64 `json:"judge_errors"`
	JudgeUnparsed int64 `json:"judge_unparsed"`
	CacheHits     int64 `json:"cache_hits"`
	// JudgeFailed counts items whose judge never parsed; each then went to
	// Fallback, Zeroed or Dropped by the policy.
	JudgeFailed int64 `json:"judge_failed"`
	Fallback    int64 `json:"fallback"`
	Zeroed      int64 `json:"zeroed"`
	Dropped     int64 `json:"dropped"`
	// InFlight is the judge calls in flight now; MaxInFlight the most ever.
	InFlight    int64 `json:"in_flight"`
	MaxInFlight int64 `json:"max_in_flight"`
}

// Stats returns the running totals.
func (s *Scorer) Stats() Stats {
	c := &s.stats
	return Stats{
		Items: c.items.Load(), Invalid: c.invalid.Load(), NoAnswer: c.noAnswer.Load(), Manipulation: c.manipulation.Load(),
		JudgeCalls: c.judgeCalls.Load(), JudgeErrors: c.judgeErrors.Load(), JudgeUnparsed: c.judgeUnparsed.Load(), CacheHits: c.cacheHits.Load(),
		JudgeFailed: c.judgeFailed.Load(), Fallback: c.fallback.Load(), Zeroed: c.zeroed.Load(), Dropped: c.dropped.Load(),
		InFlight: c.inFlight.Load(), MaxInFlight: c.maxInFlight.Load(),
	}
}
