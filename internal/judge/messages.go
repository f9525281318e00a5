package judge

import (
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Headings of the judge user message. The history heading is the published
// one; the others name the parts in the published order.
const (
	HistoryHeading    = "# Context (Historical Interactions):"
	CurrentHeading    = "# Current Turn:"
	PredictionHeading = "# Predicted Observation:"
	TruthHeading      = "# Ground Truth Observation:"
)

// Messages builds the judge conversation for one sample: the domain's judge
// system prompt, then one user message made of
//
//	# Context (Historical Interactions):\n
//	prompt[i] + "\n" + response[i] + "\n\n"      for every turn before turn_idx
//	\n# Current Turn:\n<current_prompt, or prompt[turn_idx-1] if empty>\n\n
//	# Predicted Observation:\n<fence>\n<prediction>\n<fence>\n\n
//	# Ground Truth Observation:\n<fence>\n<truth>\n<fence>\n\n
//	<instructions>
//
// The observation marker is stripped from the prediction and the ground
// truth (conversation.StripObservationMarker), never from the history. The fence is
// always three backticks, as published, even when the fenced text holds a
// code fence of its own: a longer fence would read more cleanly but would
// change the judge's input, and with it the scores, for exactly the samples
// that contain one (SWE and MCP outputs often do). The record must have
// passed Validate; out-of-range turns are treated as absent rather than
// panicking.
func Messages(rec *trajectory.Record, prediction string) []worldmodel.Message {
	system, _ := SystemPrompt(rec.Domain())
	turn := rec.TurnIdx
	var b strings.Builder
	b.WriteString(HistoryHeading)
	b.WriteByte('\n')
	for i := 0; i < turn-1 && i < len(rec.Prompt) && i < len(rec.Response); i++ {
		b.WriteString(rec.Prompt[i])
		b.WriteByte('\n')
		b.WriteString(rec.Response[i])
		b.WriteString("\n\n")
	}
	current := rec.CurrentPrompt
	if current == "" && turn >= 1 && turn <= len(rec.Prompt) {
		current = rec.Prompt[turn-1]
	}
	truth := ""
	if turn >= 1 && turn <= len(rec.Response) {
		truth = rec.Response[turn-1]
	}
	b.WriteByte('\n')
	b.WriteString(CurrentHeading)
	b.WriteByte('\n')
	b.WriteString(current)
	b.WriteString("\n\n")
	writeFenced(&b, PredictionHeading, conversation.StripObservationMarker(prediction))
	writeFenced(&b, TruthHeading, conversation.StripObservationMarker(truth))
	b.WriteString(instructions)
	return []worldmodel.Message{
		{Role: "system", Content: system},
		{Role: "user", Content: b.String()},
	}
}

func writeFenced(b *strings.Builder, heading, body string) {
	const f = "```"
	b.WriteString(heading)
	b.WriteByte('\n')
	b.WriteString(f)
	b.WriteByte('\n')
	b.WriteString(body)
	b.WriteByte('\n')
	b.WriteString(f)
	b.WriteString("\n\n")
}
