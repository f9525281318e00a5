package judge

import (
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/pytext"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Headings and labels of the judge user message, as the official
// evaluation script (QwenLM/Qwen-AgentWorld eval.py at cd0aa83) writes
// them around the template's placeholders. The response labels of the
// pairwise modes are ours: the official script defines those templates but
// no code that fills them.
const (
	HistoryHeading  = "# Context (Historical Interactions):"
	CurrentHeading  = "# Current Turn:"
	PredictionLabel = "**World Model Output (Simulated):**"
	TruthLabel      = "**Ground Truth (Real Output):**"
	ResponseALabel  = "**Response A:**"
	ResponseBLabel  = "**Response B:**"
)

// Messages builds the pointwise judge conversation for one sample: the
// domain's judge system prompt, then one user message. It is the single
// builder of the rubric judge's conversation (bench and the RL reward both
// call it); p nil means agentworld's own text, [LoadPrompts] the official
// one, and only the text differs. generic reports an unknown domain.
//
// The user message is the template filled as the official script fills it:
//
//	context:               "" on the first turn, else HistoryHeading + "\n\n" +
//	                       prompt[i] + "\n" + response[i] + "\n\n" for each earlier turn
//	world_model_input:     CurrentHeading + "\n\n" + current_prompt (prompt[turn_idx-1] if empty)
//	predicted_observation: PredictionLabel + "\n```\n" + prediction + "\n```"
//	ground_truth:          TruthLabel + "\n```\n" + response[turn_idx-1] + "\n```"
//
// and the whole message stripped of surrounding whitespace (Python's
// str.strip). The observation marker is stripped from the prediction and
// the ground truth (conversation.StripObservationMarker), never from the
// history; with the official text only for the seven domains, as there. The
// fence is always three backticks, as published, even when the fenced text
// holds a code fence of its own: a longer fence would read more cleanly but
// would change the judge's input, and with it the scores, for exactly the
// samples that contain one (SWE and MCP outputs often do). The record must
// have passed Validate; out-of-range turns are treated as absent rather
// than panicking.
func Messages(p *Prompts, rec *trajectory.Record, prediction string) ([]worldmodel.Message, bool) {
	if p == nil {
		p = own
	}
	f := baseFields(p, rec)
	f["predicted_observation"] = fenced(PredictionLabel, cleanMarker(p, rec, prediction))
	f["ground_truth"] = fenced(TruthLabel, cleanMarker(p, rec, groundTruth(rec)))
	return conversationOf(p, Pointwise, rec, f)
}

// PairMessages builds the judge conversation of a pairwise mode (Turing or
// Reference) with the same structure as [Messages]: a and b fill
// response_a and response_b under ResponseALabel and ResponseBLabel, marker
// cleaned like the prediction; the reference template also gets the ground
// truth. Which text is A is the caller's choice (the official reference
// template says A is the world model's).
func PairMessages(p *Prompts, mode Mode, rec *trajectory.Record, a, b string) ([]worldmodel.Message, bool) {
	if p == nil {
		p = own
	}
	f := baseFields(p, rec)
	f["response_a"] = fenced(ResponseALabel, cleanMarker(p, rec, a))
	f["response_b"] = fenced(ResponseBLabel, cleanMarker(p, rec, b))
	if mode == Reference {
		f["ground_truth"] = fenced(TruthLabel, cleanMarker(p, rec, groundTruth(rec)))
	}
	return conversationOf(p, mode, rec, f)
}

func conversationOf(p *Prompts, mode Mode, rec *trajectory.Record, f map[string]string) ([]worldmodel.Message, bool) {
	system, generic := p.System(mode, rec.Task)
	user := pytext.Strip(p.Template(mode).Format(f))
	return []worldmodel.Message{
		{Role: "system", Content: system},
		{Role: "user", Content: user},
	}, generic
}

// baseFields fills context and world_model_input.
func baseFields(p *Prompts, rec *trajectory.Record) map[string]string {
	turn := rec.TurnIdx
	var b strings.Builder
	for i := 0; i < turn-1 && i < len(rec.Prompt) && i < len(rec.Response); i++ {
		if b.Len() == 0 {
			b.WriteString(HistoryHeading)
			b.WriteString("\n\n")
		}
		b.WriteString(rec.Prompt[i])
		b.WriteByte('\n')
		b.WriteString(rec.Response[i])
		b.WriteString("\n\n")
	}
	current := rec.CurrentPrompt
	if current == "" && turn >= 1 && turn <= len(rec.Prompt) {
		current = rec.Prompt[turn-1]
	}
	return map[string]string{
		"context":           b.String(),
		"world_model_input": CurrentHeading + "\n\n" + current,
	}
}

func groundTruth(rec *trajectory.Record) string {
	if turn := rec.TurnIdx; turn >= 1 && turn <= len(rec.Response) {
		return rec.Response[turn-1]
	}
	return ""
}

// cleanMarker strips the observation marker. The official script knows the
// marker only for its seven domains and just strips the text of others.
func cleanMarker(p *Prompts, rec *trajectory.Record, s string) string {
	if p.official && !domain.Domain(officialSubtask(rec.Task)).Known() {
		return pytext.Strip(s)
	}
	return conversation.StripObservationMarker(s)
}

func fenced(label, body string) string {
	const f = "```"
	return label + "\n" + f + "\n" + body + "\n" + f
}
