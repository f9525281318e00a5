package research

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

// ModelOptimizer asks an OpenAI-compatible chat model for an edited
// template.
type ModelOptimizer struct {
	c     worldmodel.Completer
	model string
}

// NewModelOptimizer uses c; model is sent as the request's model ("" lets
// the client's own).
func NewModelOptimizer(c worldmodel.Completer, model string) *ModelOptimizer {
	return &ModelOptimizer{c: c, model: model}
}

// metaPrompt is the optimizer's system message.
const metaPrompt = `You improve the system prompt of a language model that acts as a simulated environment: given an agent's action, it must write the observation the real environment would return. You receive the current prompt template (Go text/template syntax; keep every {{...}} action and {{define}} block working, and keep the "prompt" block) and the cases where the simulator scored worst, each with the judge's criticism, the real observation and the simulator's prediction.

Find what the failures have in common and change the template so a simulator following it would avoid them. Prefer a few precise instructions over long rewrites; do not mention the specific cases, since the template must work for unseen ones.

Answer with exactly two parts:
<rationale>one or two sentences on what you changed and why</rationale>
<template>
the complete new template
</template>`

var (
	rationaleTag = regexp.MustCompile(`(?s)<rationale>(.*?)</rationale>`)
	templateTag  = regexp.MustCompile(`(?s)<template>\n?(.*?)</template>`)
)

// Propose sends the request and parses the answer.
func (m *ModelOptimizer) Propose(ctx context.Context, req OptimizeRequest) (*Proposal, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Domain: %s\nMean score of this template on the minibatch: %.1f of 100\n\n<current_template>\n%s</current_template>\n", req.Domain, req.Score, req.Template)
	for i, s := range req.Worst {
		fmt.Fprintf(&b, "\n## Case %d (trajectory %s, turn %d, score %.1f)\n", i+1, s.Trajectory, s.Turn, s.Score)
		if len(s.Weaknesses) > 0 {
			fmt.Fprintf(&b, "Judge's criticism:\n- %s\n", strings.Join(s.Weaknesses, "\n- "))
		}
		fmt.Fprintf(&b, "Real observation:\n%s\nPrediction:\n%s\n", s.Truth, s.Prediction)
	}
	resp, err := m.c.Complete(ctx, worldmodel.Request{Model: m.model, Messages: []worldmodel.Message{
		{Role: "system", Content: metaPrompt},
		{Role: "user", Content: b.String()},
	}})
	if err != nil {
		return nil, err
	}
	return ParseProposal(resp.Content)
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
