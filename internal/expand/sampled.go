package expand

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Teacher is the teacher generation `agentworld data sample` kept as a
// sample's target (package rejection): the reasoning that goes before the
// predicted observation, which replaces the recorded one.
type Teacher struct {
	// Beam is the kept beam's id, "{trajectory}-{turn}-{beam}".
	Beam string `json:"beam"`
	// Reasoning is the teacher's thinking; "" when it gave none.
	Reasoning string `json:"reasoning,omitempty"`
	// Reward is the beam's hybrid reward.
	Reward float64 `json:"reward"`
}

func (s *Sample) Reasoning() string {
	if s.Teacher == nil {
		return ""
	}
	return s.Teacher.Reasoning
}

// InlineReasoning puts reasoning before an answer the way thinking models
// write it, "<think>\n" reasoning "\n</think>\n\n" answer, the form
// ms-swift, LLaMA-Factory's classic engine and the Qwen3 chat template
// (which TRL applies) train on; no reasoning leaves the answer as it is.
func InlineReasoning(reasoning, answer string) string {
	if reasoning == "" {
		return answer
	}
	return thinkOpen + reasoning + thinkClose + answer
}

const (
	thinkOpen  = "<think>\n"
	thinkClose = "\n</think>\n\n"
	answerOpen = "<predicted_observation>\n"
	answerEnd  = "\n</predicted_observation>"
)

// sampledLine is what ReadSampledLine reads of a line of `data sample`'s
// sft.jsonl (rejection.SFTLine).
type sampledLine struct {
	Messages []struct {
		Role             string  `json:"role"`
		Content          *string `json:"content"`
		ReasoningContent string  `json:"reasoning_content"`
	} `json:"messages"`
	LossWeight   *float64 `json:"loss_weight"`
	Category     string   `json:"category"`
	ID           string   `json:"id"`
	Sample       string   `json:"sample"`
	TrajectoryID string   `json:"trajectory_id"`
	TotalTurns   int      `json:"total_turns"`
	Domain       string   `json:"domain"`
	Turn         int      `json:"turn"`
	Template     string   `json:"template"`
	TemplateID   string   `json:"template_id"`
	Reward       float64  `json:"reward"`
}

// ReadSampledLine reads a selected SFT sample of `agentworld data sample`
// (a line of its sft.jsonl) back into the Sample it was made from, with
// the kept beam as its Teacher and Observation. The line's messages must
// be exactly what that sample renders to (Prompt, then the target with
// the reasoning inline or in reasoning_content): a line whose messages
// were edited into something else is refused, naming the message, rather
// than re-exported in a form the simulator never sends.
func ReadSampledLine(data []byte, file string, line int) (*Sample, []*datapipe.RecordError) {
	fail := func(field string, format string, args ...any) (*Sample, []*datapipe.RecordError) {
		return nil, []*datapipe.RecordError{{File: file, Line: line, Field: field, Err: fmt.Errorf("%w: %s", datapipe.ErrInvalid, fmt.Sprintf(format, args...))}}
	}
	var l sampledLine
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, []*datapipe.RecordError{{File: file, Line: line, Err: fmt.Errorf("%w: %v", datapipe.ErrBadJSON, err)}}
	}
	switch {
	case l.ID == "":
		return fail("id", "missing (a line of agentworld data sample's sft.jsonl names its beam)")
	case l.LossWeight == nil:
		return fail("loss_weight", "missing")
	case len(l.Messages) < 2:
		return fail("messages", "want the prompt's messages and the target, got %d message(s)", len(l.Messages))
	}
	for i, m := range l.Messages {
		if m.Content == nil {
			return fail(fmt.Sprintf("messages[%d].content", i), "missing")
		}
	}
	msgs := l.Messages
	last := len(msgs) - 1
	s := &Sample{ID: l.Sample, TrajectoryID: l.TrajectoryID, Domain: l.Domain, Turn: l.Turn, TotalTurns: l.TotalTurns,
		Template: l.Template, TemplateID: l.TemplateID, Category: l.Category, Weight: *l.LossWeight}
	i := 0
	if msgs[0].Role == "system" {
		s.System, i = *msgs[0].Content, 1
	}
	if (last-i)%2 != 1 {
		return fail("messages", "want (system,) user/assistant pairs, the current action and the target")
	}
	for ; i < last; i += 2 {
		field := fmt.Sprintf("messages[%d]", i)
		if msgs[i].Role != "user" {
			return fail(field+".role", "%q, want user", msgs[i].Role)
		}
		n, action, ws, ctl, err := conversation.ParseUserMessage(*msgs[i].Content)
		if err != nil {
			return fail(field+".content", "%v", err)
		}
		if ws != "" || ctl != "" {
			return fail(field+".content", "a training sample's action carries no world state or control text")
		}
		if n != len(s.History)+1 {
			return fail(field+".content", "turn %d, want %d", n, len(s.History)+1)
		}
		if i+1 == last {
			if s.Turn == 0 {
				s.Turn = n
			}
			s.Action = action
			break
		}
		if msgs[i+1].Role != "assistant" {
			return fail(fmt.Sprintf("messages[%d].role", i+1), "%q, want assistant", msgs[i+1].Role)
		}
		obs := *msgs[i+1].Content
		// An observation already in marker form renders as it is.
		if trimmed := conversation.TrimObservationMarker(obs); conversation.ObservationResponse(trimmed) == obs {
			obs = trimmed
		}
		s.History = append(s.History, trajectory.Turn{Action: action, Observation: obs})
	}
	field := fmt.Sprintf("messages[%d]", last)
	if msgs[last].Role != "assistant" {
		return fail(field+".role", "%q, want the assistant target", msgs[last].Role)
	}
	content, reasoning := *msgs[last].Content, msgs[last].ReasoningContent
	answer := content
	if reasoning == "" && strings.HasPrefix(content, thinkOpen) {
		if k := strings.LastIndex(content, thinkClose+answerOpen); k >= len(thinkOpen) {
			reasoning, answer = content[len(thinkOpen):k], content[k+len(thinkClose):]
		}
	}
	pred, ok := strings.CutPrefix(answer, answerOpen)
	if pred, ok2 := strings.CutSuffix(pred, answerEnd); ok && ok2 {
		s.Observation = pred
	} else {
		return fail(field+".content", "not a teacher target: want [<think>…</think>] then the observation in <predicted_observation> tags")
	}
	if s.TrajectoryID == "" {
		s.TrajectoryID = trajectoryOfBeam(l.ID, s.Turn)
	}
	if s.ID == "" {
		s.ID = s.TrajectoryID + "#" + strconv.Itoa(s.Turn)
	}
	s.TotalTurns = max(s.TotalTurns, s.Turn)
	s.Teacher = &Teacher{Beam: l.ID, Reasoning: reasoning, Reward: l.Reward}

	// The line must be what the sample renders to.
	for k, m := range s.Prompt() {
		if m.Role != msgs[k].Role || m.Content != *msgs[k].Content {
			return fail(fmt.Sprintf("messages[%d].content", k), "does not render back the same from the sample it encodes (edited by hand?)")
		}
	}
	want := s.Target()
	if msgs[last].ReasoningContent != "" {
		want = conversation.Answer(s.Observation)
	}
	if want != content {
		return fail(field+".content", "does not render back the same from the sample it encodes (edited by hand?)")
	}
	return s, nil
}

// trajectoryOfBeam is the trajectory part of a beam id
// "{trajectory}-{turn}-{beam}"; the whole id when it has no such suffix.
func trajectoryOfBeam(beam string, turn int) string {
	j := strings.LastIndexByte(beam, '-')
	if j < 0 {
		return beam
	}
	t, ok := strings.CutSuffix(beam[:j], "-"+strconv.Itoa(turn))
	if !ok {
		return beam
	}
	return t
}

// eachSampled is eachTrajectory for lines of the sampled set
// (ReadSampledLine).
func EachSampled(batch []datapipe.InLine, fn func(l *datapipe.InLine, s *Sample) error) (errs []*datapipe.RecordError, ok int64, err error) {
	return datapipe.EachDecoded(batch, ReadSampledLine, fn)
}
