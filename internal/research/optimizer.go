package research

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// ErrUnusableAnswer means the optimizer answered, on every attempt, with
// nothing that can be tried (no <template> part): the iteration is
// rejected with the reason and the run goes on.
var ErrUnusableAnswer = errors.New("the optimizer's answer holds no usable template")

// AnswerCache keeps optimizer answers between runs (bench.Cache is one).
// Only answers that parse are stored, so a bad answer is asked again on
// the next run instead of being replayed for ever.
type AnswerCache interface {
	Key(req worldmodel.Request, defaultModel string) string
	Get(key string) (*worldmodel.Response, bool)
	Put(key string, r *worldmodel.Response)
}

// Defaults of [OptimizerOptions].
const (
	// DefaultOptimizerAttempts is how often an unusable answer is asked
	// again, each time told what was wrong.
	DefaultOptimizerAttempts = 3
	// DefaultHistoryBytes bounds the earlier turns shown with one case:
	// the newest turns that fit, older ones counted but left out.
	DefaultHistoryBytes = 6000
	// DefaultWorldBytes bounds one world's components as shown once for
	// every trajectory the cases come from.
	DefaultWorldBytes = 8000
)

// OptimizerOptions tune a [ModelOptimizer]; nil means every default.
type OptimizerOptions struct {
	// Cache keeps the answers that parse; nil keeps none.
	Cache AnswerCache
	// Attempts per proposal; 0 means DefaultOptimizerAttempts.
	Attempts int
	// HistoryBytes bounds the history shown per case; 0 means
	// DefaultHistoryBytes.
	HistoryBytes int
	// WorldBytes bounds each world's components; 0 means
	// DefaultWorldBytes.
	WorldBytes int
}

// ModelOptimizer asks an OpenAI-compatible chat model for an edited
// template.
type ModelOptimizer struct {
	c     worldmodel.Completer
	model string
	o     OptimizerOptions
}

// NewModelOptimizer uses c; model is sent as the request's model ("" lets
// the client's own).
func NewModelOptimizer(c worldmodel.Completer, model string, opts *OptimizerOptions) *ModelOptimizer {
	var o OptimizerOptions
	if opts != nil {
		o = *opts
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultOptimizerAttempts
	}
	if o.HistoryBytes <= 0 {
		o.HistoryBytes = DefaultHistoryBytes
	}
	if o.WorldBytes <= 0 {
		o.WorldBytes = DefaultWorldBytes
	}
	return &ModelOptimizer{c: c, model: model, o: o}
}

// metaPrompt is the optimizer's system message.
const metaPrompt = `You improve the system prompt of a language model that acts as a simulated environment: given an agent's action, it must write the observation the real environment would return. You receive the current prompt template (Go text/template syntax; keep every {{...}} action and {{define}} block working, and keep the "prompt" block), the worlds the cases come from (the components the template is rendered with), and the cases where the simulator scored worst: each with the agent's action, the turns before it, the judge's criticism, the real observation and the simulator's prediction.

Find what the failures have in common and change the template so a simulator following it would avoid them. Prefer a few precise instructions over long rewrites; do not mention the specific cases, since the template must work for unseen ones.

Answer with exactly two parts:
<rationale>one or two sentences on what you changed and why</rationale>
<template>
the complete new template
</template>`

// retryNote follows an unusable answer on the next attempt.
const retryNote = "Your answer could not be used: %v. Answer again with exactly the two parts, <rationale>…</rationale> and <template>…</template>, the template complete."

var (
	rationaleTag = regexp.MustCompile(`(?s)<rationale>(.*?)</rationale>`)
	templateTag  = regexp.MustCompile(`(?s)<template>\n?(.*?)</template>`)
)

// Propose sends the request and parses the answer. An answer that does
// not parse is asked again (the next request shows it and says what was
// wrong), up to the attempts; when none parses the error wraps
// [ErrUnusableAnswer]. Only answers that parse are cached.
func (m *ModelOptimizer) Propose(ctx context.Context, req OptimizeRequest) (*Proposal, error) {
	msgs := []worldmodel.Message{
		{Role: "system", Content: metaPrompt},
		{Role: "user", Content: m.render(req)},
	}
	var lastErr error
	for attempt := 1; attempt <= m.o.Attempts; attempt++ {
		wreq := worldmodel.Request{Model: m.model, Messages: msgs}
		key := ""
		if m.o.Cache != nil {
			key = m.o.Cache.Key(wreq, m.model)
			if resp, ok := m.o.Cache.Get(key); ok {
				if p, err := ParseProposal(resp.Content); err == nil {
					return p, nil
				}
			}
		}
		resp, err := m.c.Complete(ctx, wreq)
		if err != nil {
			return nil, err
		}
		p, err := ParseProposal(resp.Content)
		if err == nil {
			if m.o.Cache != nil && !resp.Truncated() {
				m.o.Cache.Put(key, resp)
			}
			return p, nil
		}
		lastErr = err
		msgs = append(msgs[:len(msgs):len(msgs)],
			worldmodel.Message{Role: "assistant", Content: resp.Content},
			worldmodel.Message{Role: "user", Content: fmt.Sprintf(retryNote, err)})
	}
	return nil, fmt.Errorf("%w: %d attempts, the last: %v", ErrUnusableAnswer, m.o.Attempts, lastErr)
}

// render is the optimizer's user message: the template, each world the
// cases come from (once), then the cases.
func (m *ModelOptimizer) render(req OptimizeRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Domain: %s\nMean score of this template on the minibatch: %.1f of 100\n\n<current_template>\n%s</current_template>\n", req.Domain, req.Score, req.Template)
	shown := map[string]bool{}
	for _, s := range req.Worst {
		if s.World == nil || shown[s.Trajectory] {
			continue
		}
		shown[s.Trajectory] = true
		fmt.Fprintf(&b, "\n## World of trajectory %s\n%s", s.Trajectory, bounded(worldText(s.World), m.o.WorldBytes))
	}
	for i, s := range req.Worst {
		fmt.Fprintf(&b, "\n## Case %d (trajectory %s, turn %d, score %.1f)\n", i+1, s.Trajectory, s.Turn, s.Score)
		if len(s.History) > 0 {
			b.WriteString(historyText(s.History, m.o.HistoryBytes))
		}
		if s.Action != "" {
			fmt.Fprintf(&b, "Action:\n%s\n", strings.TrimPrefix(conversation.TrimActionHeading(s.Action, false), "\n"))
		}
		if len(s.Weaknesses) > 0 {
			fmt.Fprintf(&b, "Judge's criticism:\n- %s\n", strings.Join(s.Weaknesses, "\n- "))
		}
		fmt.Fprintf(&b, "Real observation:\n%s\nPrediction:\n%s\n", conversation.TrimObservationMarker(s.Truth), s.Prediction)
	}
	return b.String()
}

// worldText lays out a world's components under their names, empty ones
// left out.
func worldText(p *promptlib.Parts) string {
	var b strings.Builder
	for _, f := range []struct{ name, text string }{
		{"Task description", p.TaskDescription}, {"Action space", p.ActionSpace}, {"Initial state", p.InitialState},
		{"Demonstrations", p.Demonstrations}, {"Simulation instruction", p.SimulationInstruction},
	} {
		if t := strings.TrimSpace(f.text); t != "" {
			fmt.Fprintf(&b, "### %s\n%s\n", f.name, t)
		}
	}
	return b.String()
}

// historyText shows the newest earlier turns that fit in limit bytes,
// saying how many older ones were left out; when even the newest is
// longer than the limit, its end is shown.
func historyText(turns []trajectory.Turn, limit int) string {
	var parts []string
	used, left := 0, 0
	for i := len(turns) - 1; i >= 0; i-- {
		t := conversation.ActionPrompt(i+1, turns[i].Action) + "\n" + conversation.ObservationResponse(turns[i].Observation) + "\n"
		if used+len(t) > limit {
			left = i + 1
			if len(parts) == 0 {
				tail := lastBytes(t, limit)
				parts = append(parts, fmt.Sprintf("[… %d bytes of turn %d cut]\n", len(t)-len(tail), i+1)+tail)
				left = i
			}
			break
		}
		parts = append(parts, t)
		used += len(t)
	}
	var b strings.Builder
	b.WriteString("Turns before this one:\n")
	if left > 0 {
		fmt.Fprintf(&b, "[%d earlier turns left out]\n", left)
	}
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteString(parts[i])
	}
	return b.String()
}

// bounded cuts s to about limit bytes (at a character boundary), saying
// so.
func bounded(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	n := limit
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("\n[… %d bytes cut]\n", len(s)-n)
}

// lastBytes is the end of s, at most n bytes, starting at a character.
func lastBytes(s string, n int) string {
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// ParseProposal reads an optimizer answer: a <template> part is required,
// <rationale> is optional.
func ParseProposal(s string) (*Proposal, error) {
	t := templateTag.FindStringSubmatch(s)
	if t == nil || strings.TrimSpace(t[1]) == "" {
		return nil, fmt.Errorf("optimizer answer has no <template>…</template> part")
	}
	p := &Proposal{Template: t[1]}
	if r := rationaleTag.FindStringSubmatch(s); r != nil {
		p.Rationale = strings.TrimSpace(r[1])
	}
	return p, nil
}
