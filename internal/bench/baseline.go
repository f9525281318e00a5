package bench

import (
	"context"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// CopyBaselineURL selects CopyBaseline in place of a model endpoint.
const CopyBaselineURL = "baseline:copy"

// CopyBaseline is a world model that needs no server: it predicts that each
// action is answered by the previous observation, verbatim (the last
// assistant message of the conversation); on a first turn that is the
// initial state (the system prompt's "## Initial state" section), and
// where the prompt has none, a line saying there is nothing to copy. It
// always answers, so its first turns are scored as the (poor) predictions
// they are, never counted as model faults (no_generation). It lets the
// whole pipeline run on a fresh machine, and its score is the floor a real
// world model has to clear.
type CopyBaseline struct{}

// NothingToCopy is CopyBaseline's answer on a first turn whose system
// prompt has no initial state.
const NothingToCopy = "(copy baseline: no earlier observation to copy)"

// Complete implements worldmodel.Completer.
func (CopyBaseline) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	resp := &worldmodel.Response{FinishReason: "stop", Model: "copy-baseline"}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "assistant" {
			resp.Content = conversation.Answer(req.Messages[i].Content)
			return resp, nil
		}
	}
	obs := NothingToCopy
	for _, m := range req.Messages {
		if m.Role == "system" {
			if s := initialState(m.Content); s != "" {
				obs = s
			}
			break
		}
	}
	resp.Content = conversation.Answer(obs)
	return resp, nil
}

// initialState is the body of a system prompt's "## Initial state"
// section (up to the next "## " heading), "" when it has none.
func initialState(system string) string {
	var body []string
	in := false
	for _, line := range strings.Split(system, "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			if in {
				break
			}
			in = strings.EqualFold(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(title), ":")), "initial state")
			continue
		}
		if in {
			body = append(body, line)
		}
	}
	return strings.TrimSpace(strings.Join(body, "\n"))
}
