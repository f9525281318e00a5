package bench

import (
	"context"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// CopyBaselineURL selects CopyBaseline in place of a model endpoint.
const CopyBaselineURL = "baseline:copy"

// CopyBaseline is a world model that needs no server: it predicts that each
// action is answered by the previous observation, verbatim (the last
// assistant message of the conversation), and answers nothing on a first
// turn, which the pipeline then counts as a no_generation failure. It lets
// the whole pipeline run on a fresh machine, and its score is the floor a
// real world model has to clear.
type CopyBaseline struct{}

// Complete implements worldmodel.Completer.
func (CopyBaseline) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	resp := &worldmodel.Response{FinishReason: "stop", Model: "copy-baseline"}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "assistant" {
			resp.Content = conversation.Answer(req.Messages[i].Content)
			break
		}
	}
	return resp, nil
}
