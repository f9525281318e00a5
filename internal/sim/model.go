package sim

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// BackendModel is the backend name of the world-model simulator.
const BackendModel = "model"

// ModelOptions tunes the world-model backend. The zero value of each field
// is a usable default.
type ModelOptions struct {
	// Model is sent as the model name when the session names none; "" lets
	// the completer choose.
	Model string
	// MaxTokens is the generation budget per step; 0 means 32768 (thinking
	// models spend 4-8K tokens reasoning; small budgets give empty answers).
	MaxTokens int
	// RetryMaxTokens is the budget of the one retry after an empty or
	// length-cut answer; 0 means twice MaxTokens.
	RetryMaxTokens int
	// Temperature is used when the world spec sets none; nil means 0.6.
	Temperature *float64
	// ContextBudget is the model's context in tokens; the prompt may use
	// ContextBudget - MaxTokens. 0 means 131072; negative disables
	// truncation.
	ContextBudget int
	// LowWater is the prompt size a truncation cut brings the prompt down
	// to, as a fraction of the prompt budget; 0 means 0.75.
	LowWater float64
	// Count counts tokens for the budget; nil means EstimateTokens.
	Count TokenCounter
}

// NewModelBackend returns the BackendFactory of the world-model simulator:
// each step sends the session's system prompt, its recorded history and
// the new action to c, and extracts the prediction from the answer.
func NewModelBackend(c worldmodel.Completer, o *ModelOptions) BackendFactory {
	var opts ModelOptions
	if o != nil {
		opts = *o
	}
	if opts.MaxTokens == 0 {
		opts.MaxTokens = 32768
	}
	if opts.RetryMaxTokens == 0 {
		opts.RetryMaxTokens = 2 * opts.MaxTokens
	}
	if opts.Temperature == nil {
		t := 0.6
		opts.Temperature = &t
	}
	if opts.ContextBudget == 0 {
		opts.ContextBudget = 131072
	}
	if opts.LowWater == 0 {
		opts.LowWater = 0.75
	}
	return func(ctx context.Context, s SessionInfo) (Environment, error) {
		limit := opts.ContextBudget - opts.MaxTokens
		if opts.ContextBudget < 0 {
			limit = 0
		} else if limit <= 0 {
			limit = opts.ContextBudget / 2
		}
		b := Budget{Limit: limit, LowWater: int(float64(limit) * opts.LowWater), Count: opts.Count}
		e := &modelEnv{c: c, opts: opts, s: s, budget: newBudgetState(b, s.SystemPrompt), sysFP: msgHash("system", s.SystemPrompt)}
		e.budget.replay(s.History)
		return e, nil
	}
}

type modelEnv struct {
	c      worldmodel.Completer
	opts   ModelOptions
	s      SessionInfo
	budget *budgetState
	// prevFP fingerprints the previous request (one hash per message), to
	// detect prefix breaks without rehashing the whole history each step.
	prevFP [][32]byte
	// turnFP caches the hashes of recorded turns' user and assistant
	// messages as they are shown (without a truncation note).
	turnFP [][2][32]byte
	sysFP  [32]byte
	// spareFP is the fingerprint before prevFP, whose array the next step
	// reuses; framed holds the message being hashed.
	spareFP [][32]byte
	framed  []byte
}

func (e *modelEnv) Reset(ctx context.Context) (Observation, error) {
	return Observation{Text: e.s.Spec.InitialState, Info: StepInfo{Backend: "spec"}}, nil
}

func (e *modelEnv) Close() error { return nil }

func (e *modelEnv) Step(ctx context.Context, in StepInput) (Observation, error) {
	msg := conversation.UserMessage(in.Turn, in.Action.Text, in.WorldState, in.Control)
	e.budget.sync(in.History)
	moved := e.budget.place(e.budget.b.Count(msg) + messageOverhead)
	msgs := BuildMessages(e.s.SystemPrompt, in.History, e.budget.cut, msg)

	info := StepInfo{Backend: BackendModel, HistoryCut: e.budget.cut}
	fp := e.fingerprint(in.History, msgs)
	if len(e.prevFP) > 0 && !moved && !isPrefix(e.prevFP, fp) {
		info.PrefixBreak = true
	}
	e.prevFP, e.spareFP = fp, e.prevFP

	req := worldmodel.Request{Model: e.s.Model, Messages: msgs, MaxTokens: e.opts.MaxTokens, Temperature: e.opts.Temperature}
	if req.Model == "" {
		req.Model = e.opts.Model
	}
	if sp := e.s.Spec.Sampling; sp != nil {
		if sp.Temperature != nil {
			req.Temperature = sp.Temperature
		}
		req.TopP = sp.TopP
		// An inline spec is the client's: it may lower the generation
		// budget the operator pays for, never raise it.
		if sp.MaxTokens > 0 && (e.s.Inline == "" || sp.MaxTokens < req.MaxTokens) {
			req.MaxTokens = sp.MaxTokens
		}
		if len(sp.Extra) > 0 {
			req.Extra = sp.Extra
		}
	}
	if e.s.Seed != nil {
		seed := *e.s.Seed*1_000_003 + int64(in.Turn)
		req.Seed = &seed
	}
	ctx = worldmodel.WithAffinity(ctx, e.s.Root)
	start := time.Now()
	resp, err := e.c.Complete(ctx, req)
	if err != nil {
		return Observation{}, fmt.Errorf("world model, turn %d: %w", in.Turn, err)
	}
	pred, bad := answerOf(resp)
	if bad != "" {
		info.Retries++
		retry := req
		retry.MaxTokens = e.opts.RetryMaxTokens
		if req.MaxTokens*2 > retry.MaxTokens {
			retry.MaxTokens = req.MaxTokens * 2
		}
		r2, err := e.c.Complete(ctx, retry)
		if err != nil {
			return Observation{}, fmt.Errorf("world model retry after %s, turn %d: %w", bad, in.Turn, err)
		}
		addUsage(r2, resp)
		resp = r2
		pred, bad = answerOf(resp)
		if bad != "" {
			info.Error = bad + " after one retry with a larger budget"
		}
	}
	info.LatencyMS = time.Since(start).Milliseconds()
	if resp.Attempts > 0 { // 0: the completer does not count attempts (replay)
		info.TransportRetries = max(resp.Attempts-1-info.Retries, 0)
	}
	info.Model = resp.Model
	info.PromptTokens = resp.PromptTokens
	info.CompletionTokens = resp.CompletionTokens
	info.CachedTokens = resp.CachedTokens
	info.FinishReason = resp.FinishReason
	info.Reasoning = resp.Reasoning
	if info.Reasoning == "" {
		info.Reasoning = conversation.Reasoning(resp.Content)
	}
	if r, ok := replicaOf(resp); ok {
		info.Replica = r
	}
	return Observation{Text: pred, Message: msg, Info: info}, nil
}

// msgHash fingerprints one message as RenderTranscript frames it.
func msgHash(role, content string) [32]byte {
	var e modelEnv
	return e.hash(role, content)
}

// hash is msgHash framing the message in the environment's buffer, so a
// step allocates nothing to hash.
func (e *modelEnv) hash(role, content string) [32]byte {
	e.framed = append(append(append(e.framed[:0], role...), 0), content...)
	return sha256.Sum256(e.framed)
}

// fingerprint hashes each message of a request; recorded turns' hashes are
// computed once and reused, so a step costs O(turns) comparisons, not a
// pass over the whole history's bytes. Message-wise prefix equals byte-wise
// prefix of the rendered transcript, since messages are framed.
func (e *modelEnv) fingerprint(history []HistoryTurn, msgs []worldmodel.Message) [][32]byte {
	for len(e.turnFP) < len(history) {
		h := history[len(e.turnFP)]
		e.turnFP = append(e.turnFP, [2][32]byte{e.hash("user", h.Message), e.hash("assistant", h.Assistant)})
	}
	fp := e.spareFP[:0]
	i := 0
	if len(msgs) > 0 && msgs[0].Role == "system" {
		fp = append(fp, e.sysFP)
		i = 1
	}
	cut := e.budget.cut
	for t := cut; t < len(history); t++ {
		if t == cut && cut > 0 {
			fp = append(fp, e.hash("user", msgs[i].Content))
		} else {
			fp = append(fp, e.turnFP[t][0])
		}
		fp = append(fp, e.turnFP[t][1])
		i += 2
	}
	last := msgs[len(msgs)-1]
	return append(fp, e.hash(last.Role, last.Content))
}

func isPrefix(a, b [][32]byte) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// addUsage folds the first attempt's token usage into the retry's answer,
// so info counts what the step cost.
func addUsage(dst, first *worldmodel.Response) {
	dst.PromptTokens += first.PromptTokens
	dst.CompletionTokens += first.CompletionTokens
	dst.CachedTokens += first.CachedTokens
	dst.Attempts += first.Attempts
}

// answerOf extracts the prediction and says what is wrong with it, if
// anything: an empty generation, a length-cut one, or one with nothing left
// after the thinking.
func answerOf(r *worldmodel.Response) (string, string) {
	if strings.TrimSpace(r.Content) == "" {
		if r.Truncated() {
			return conversation.NoOutput, "empty answer (cut by the token budget)"
		}
		return conversation.NoOutput, "empty answer"
	}
	pred := conversation.ExtractPrediction(r.Content)
	if r.Truncated() {
		return pred, "answer cut by the token budget (finish_reason=length)"
	}
	if pred == conversation.NoOutput {
		return pred, "no prediction in the answer"
	}
	return pred, ""
}

func replicaOf(r *worldmodel.Response) (string, bool) {
	return r.ServedBy, r.ServedBy != ""
}

// IsUnavailable reports a step error caused by an unreachable world model,
// which clients should retry later.
func IsUnavailable(err error) bool { return errors.Is(err, worldmodel.ErrUnavailable) }
