package sim

import (
	"context"
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
	// Count counts tokens for the budget; nil means tokencount.Estimate.
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
		e := &modelEnv{c: c, opts: opts, s: s, budget: newBudgetState(b, s.SystemPrompt), replica: s.Replica}
		e.budget.replay(s.History)
		return e, nil
	}
}

type modelEnv struct {
	c      worldmodel.Completer
	opts   ModelOptions
	s      SessionInfo
	budget *budgetState
	// msgs holds the messages of the previous request. The next request
	// begins with them unless a truncation cut moved (a session's history
	// only grows), and is then made by appending its new messages to
	// msgs: a step copies no history and hashes nothing to check that its
	// request extends the previous one. Messages below len(msgs) are never
	// written again (a request that does not extend msgs gets a new
	// array), and completers are given slices capped at their length, so
	// a completer that keeps a request sees it as it was sent.
	msgs []worldmodel.Message
	// seen is the history msgs was made from, with seenCut turns hidden.
	seen    []HistoryTurn
	seenCut int
	// note is the truncation note of noteCut hidden turns (see
	// truncationNote), kept while the cut stays where it is.
	note    string
	noteCut int
	// replica served the previous request (from the transcript when the
	// environment was made for a resumed session); the next request asks
	// for it again.
	replica string
}

func (e *modelEnv) Reset(ctx context.Context) (Observation, error) {
	return Observation{Text: e.s.Spec.InitialState, Info: StepInfo{Backend: "spec"}}, nil
}

func (e *modelEnv) Close() error { return nil }

func (e *modelEnv) Step(ctx context.Context, in StepInput) (Observation, error) {
	msg := conversation.UserMessage(in.Turn, in.Action.Text, in.WorldState, in.Control)
	e.budget.sync(in.History)
	moved := e.budget.place(e.budget.b.Count(msg) + messageOverhead)
	first := len(e.msgs) == 0
	msgs, extends := e.messages(in.History, e.budget.cut, msg)

	info := StepInfo{Backend: BackendModel, HistoryCut: e.budget.cut}
	if !first && !moved && !extends {
		info.PrefixBreak = true
	}

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
	ctx = worldmodel.WithReplica(worldmodel.WithAffinity(ctx, e.s.Root), e.replica)
	start := time.Now()
	resp, err := e.c.Complete(ctx, req)
	if err != nil {
		return Observation{}, fmt.Errorf("world model, turn %d: %w", in.Turn, err)
	}
	pred, reasoning, bad := answerOf(resp)
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
		pred, reasoning, bad = answerOf(resp)
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
		info.Reasoning = reasoning
	}
	if r, ok := replicaOf(resp); ok {
		info.Replica = r
		e.replica = r
	}
	return Observation{Text: pred, Message: msg, Info: info}, nil
}

// messages is the step's request as BuildMessages makes it, built by
// extending the previous request when it is a prefix of this one
// (extends). The request is capped at its length, so an append by the
// completer copies it rather than writing into e.msgs.
func (e *modelEnv) messages(history []HistoryTurn, cut int, newest string) (msgs []worldmodel.Message, extends bool) {
	n := 1 + 2*(len(history)-cut)
	if e.s.SystemPrompt != "" {
		n++
	}
	prev := e.msgs
	if extends = e.extends(prev, history, cut, newest, n); extends {
		msgs = prev
	} else {
		msgs = make([]worldmodel.Message, 0, n+n/2+2)
	}
	for k := len(msgs); k < n; k++ {
		role, note, body := e.messageAt(history, cut, newest, k)
		msgs = append(msgs, worldmodel.Message{Role: role, Content: note + body})
	}
	e.msgs, e.seen, e.seenCut = msgs, history, cut
	return msgs[:n:n], extends
}

// extends reports whether prev is the start of the request of n messages
// that history, cut and newest make, message by message. The strings of
// a session's messages are shared with its history, so comparing equal
// ones costs a pointer comparison each. When history is the array the
// previous request was made from (e.seen) and the cut is where it was,
// prev's messages that stand for turns of that array were made from or
// compared with those very turns then, and a session never writes a turn
// once added: only prev's newest message, sent before its turn was
// recorded, is compared. So a step costs O(1) here, and O(turns) only
// when the history has moved to a larger array.
func (e *modelEnv) extends(prev []worldmodel.Message, history []HistoryTurn, cut int, newest string, n int) bool {
	if len(prev) == 0 || len(prev) > n {
		return false
	}
	from := 0
	if seen := e.seen; cut == e.seenCut && len(seen) > 0 && len(history) >= len(seen) && &history[0] == &seen[0] {
		from = len(prev) - 1
	}
	for k := from; k < len(prev); k++ {
		role, note, body := e.messageAt(history, cut, newest, k)
		c := prev[k].Content
		if prev[k].Role != role || len(c) != len(note)+len(body) || c[:len(note)] != note || c[len(note):] != body {
			return false
		}
	}
	return true
}

// noteFor is truncationNote(cut), made again only when the cut moves.
func (e *modelEnv) noteFor(cut int) string {
	if e.noteCut != cut {
		e.note, e.noteCut = truncationNote(cut), cut
	}
	return e.note
}

// messageAt is the k-th message of a request as BuildMessages makes it:
// its role, and its content as the truncation note (when it opens the
// first shown message after a cut) and the message itself.
func (e *modelEnv) messageAt(history []HistoryTurn, cut int, newest string, k int) (role, note, body string) {
	if e.s.SystemPrompt != "" {
		if k == 0 {
			return "system", "", e.s.SystemPrompt
		}
		k--
	}
	i := cut + k/2
	switch {
	case i == len(history):
		body = newest
	case k%2 == 1:
		return "assistant", "", history[i].Assistant
	default:
		body = history[i].Message
	}
	if i == cut && cut > 0 {
		note = e.noteFor(cut)
	}
	return "user", note, body
}

// addUsage folds the first attempt's token usage into the retry's answer,
// so info counts what the step cost.
func addUsage(dst, first *worldmodel.Response) {
	dst.PromptTokens += first.PromptTokens
	dst.CompletionTokens += first.CompletionTokens
	dst.CachedTokens += first.CachedTokens
	dst.Attempts += first.Attempts
}

// answerOf extracts the prediction and the reasoning (the thinking in the
// content, when the server returned none apart) and says what is wrong
// with the prediction, if anything: an empty generation, a length-cut
// one, or one with nothing left after the thinking.
func answerOf(r *worldmodel.Response) (pred, reasoning, bad string) {
	if strings.TrimSpace(r.Content) == "" {
		if r.Truncated() {
			return conversation.NoOutput, "", "empty answer (cut by the token budget)"
		}
		return conversation.NoOutput, "", "empty answer"
	}
	if r.Reasoning == "" {
		pred, reasoning = conversation.SplitAnswer(r.Content)
	} else {
		pred = conversation.ExtractPrediction(r.Content)
	}
	if r.Truncated() {
		return pred, reasoning, "answer cut by the token budget (finish_reason=length)"
	}
	if pred == conversation.NoOutput {
		return pred, reasoning, "no prediction in the answer"
	}
	return pred, reasoning, ""
}

func replicaOf(r *worldmodel.Response) (string, bool) {
	return r.ServedBy, r.ServedBy != ""
}

// IsUnavailable reports a step error caused by an unreachable world model,
// which clients should retry later.
func IsUnavailable(err error) bool { return errors.Is(err, worldmodel.ErrUnavailable) }
