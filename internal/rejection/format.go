package rejection

import (
	"fmt"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/trainset"
)

// Thinking says where an SFT target or preference completion carries the
// teacher's reasoning.
type Thinking string

const (
	// ThinkInline puts the reasoning in the assistant content as
	// "<think>\n…\n</think>\n\n" before the answer: the form ms-swift and
	// LLaMA-Factory train on (their Qwen3 templates keep the <think> block
	// of the final assistant message) and the one the Qwen3 chat template
	// TRL applies splits at </think> itself.
	ThinkInline Thinking = "inline"
	// ThinkField puts the reasoning in the assistant message's
	// reasoning_content and only the answer in content: the field the Qwen3
	// chat template reads first (message.reasoning_content), for TRL with
	// such a template.
	ThinkField Thinking = "reasoning_content"
)

// Target says what an SFT target's answer is.
type Target string

const (
	// TargetTeacher trains on the kept beam as the teacher wrote it: its
	// reasoning and its prediction, which may be factually wrong however
	// well it scored.
	TargetTeacher Target = "teacher"
	// TargetReal trains on the kept beam's reasoning followed by the real
	// observation: the reward picks the reasoning, the truth is the answer.
	TargetReal Target = "real"
)

// ParseTarget accepts "teacher" (or "") and "real".
func ParseTarget(s string) (Target, error) {
	switch Target(s) {
	case "", TargetTeacher:
		return TargetTeacher, nil
	case TargetReal:
		return TargetReal, nil
	}
	return "", fmt.Errorf("target %q: want %q or %q", s, TargetTeacher, TargetReal)
}

// ParseThinking accepts "inline" (or "") and "reasoning_content".
func ParseThinking(s string) (Thinking, error) {
	switch Thinking(s) {
	case "", ThinkInline:
		return ThinkInline, nil
	case ThinkField:
		return ThinkField, nil
	}
	return "", fmt.Errorf("thinking %q: want %q or %q", s, ThinkInline, ThinkField)
}

// Candidate is one beam with its generation and reward: a line of the
// candidates file (and, without Rank and Kept, of the journal).
type Candidate struct {
	// ID is "{trajectory}-{turn}-{beam}", beams numbered from 1.
	ID string `json:"id"`
	// Seq is the sample's 0-based position in the input.
	Seq          int64  `json:"seq"`
	Sample       string `json:"sample"`
	TrajectoryID string `json:"trajectory_id"`
	Domain       string `json:"domain"`
	Turn         int    `json:"turn"`
	Beam         int    `json:"beam"`
	// Reasoning is the teacher's thinking: the server's reasoning_content,
	// or the <think> text of the content when the server returned none.
	Reasoning string `json:"reasoning"`
	// Content is the teacher's answer text as returned.
	Content string `json:"content"`
	// Prediction is the observation extracted from Content.
	Prediction   string `json:"prediction"`
	FinishReason string `json:"finish_reason,omitempty"`
	// Error says why the beam has no generation (the teacher refused the
	// request); such a beam has no reward and is never kept.
	Error  string         `json:"error,omitempty"`
	Reward *reward.Result `json:"reward,omitempty"`
	// Rank (1 = best) and Kept are the keep policy's decision; Chosen and
	// Rejected mark the beams of the sample's preference pair.
	Rank     int  `json:"rank,omitempty"`
	Kept     bool `json:"kept"`
	Chosen   bool `json:"chosen,omitempty"`
	Rejected bool `json:"rejected,omitempty"`

	// key is the teacher request's hash (journal lines carry it).
	key string
}

// beam is what selection reads of the candidate.
func (c *Candidate) beam() Beam {
	if c.Reward == nil || c.Reward.Score == nil || c.Reward.Dropped {
		return Beam{}
	}
	return Beam{Valid: true, Reward: *c.Reward.Score, RulePass: c.Reward.Components.Rule == reward.RuleScale}
}

// Message is a message of an output line: dataset's chat message (so
// whatever the chat export writes per message travels along) with the
// reasoning_content field, set only with [ThinkField].
type Message struct {
	trainset.ChatMessage
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// assistant renders a beam as the assistant message that trains on it: the
// reasoning (inline or in its field) and the prediction inside the answer
// tag.
func (c *Candidate) assistant(th Thinking) Message {
	return c.assistantWith(th, c.Prediction)
}

// assistantWith is assistant with another answer (the real observation,
// TargetReal).
func (c *Candidate) assistantWith(th Thinking, prediction string) Message {
	answer := conversation.Answer(prediction)
	m := Message{ChatMessage: trainset.ChatMessage{Role: "assistant", Content: answer}}
	switch {
	case c.Reasoning == "":
	case th == ThinkField:
		m.ReasoningContent = c.Reasoning
	default:
		m.Content = expand.InlineReasoning(c.Reasoning, answer)
	}
	return m
}

// SFTLine is one selected SFT sample: dataset's chat export line of the
// sample (every field it writes travels along) with its target replaced by
// the kept beam, ID naming the beam, Sample the expanded sample. It is
// also the sampled set `agentworld data export --sampled` reads back
// (expand.ReadSampledLine) into every trainer layout.
type SFTLine struct {
	trainset.ChatLine
	Messages     []Message `json:"messages"`
	ID           string    `json:"id"`
	Sample       string    `json:"sample"`
	TrajectoryID string    `json:"trajectory_id"`
	TotalTurns   int       `json:"total_turns"`
	Reward       float64   `json:"reward"`
}

// matchesTruth reports whether the beam's prediction equals the real
// observation once volatile values are masked: its rule verifier's
// deterministic check (false when the verifier stopped before it, or the
// beam has no reward).
func (c *Candidate) matchesTruth() bool {
	if c.Reward == nil {
		return false
	}
	for _, ch := range c.Reward.Components.RuleChecks {
		if ch.Name == "deterministic" {
			return ch.Pass
		}
	}
	return false
}

// sftLine builds the SFT line of a kept beam: with TargetReal its answer
// is the sample's real observation.
func sftLine(s *expand.Sample, c *Candidate, th Thinking, target Target) SFTLine {
	cl := trainset.ChatLineOf(s)
	msgs := make([]Message, len(cl.Messages))
	for i, m := range cl.Messages {
		msgs[i] = Message{ChatMessage: m}
	}
	last := c.assistant(th)
	if target == TargetReal {
		last = c.assistantWith(th, s.Observation)
	}
	tm := cl.Messages[len(cl.Messages)-1]
	tm.Content = last.Content
	last.ChatMessage = tm
	msgs[len(msgs)-1] = last
	cl.Messages = nil
	return SFTLine{ChatLine: cl, Messages: msgs, ID: c.ID, Sample: s.ID, TrajectoryID: s.TrajectoryID, TotalTurns: s.TotalTurns, Reward: c.beam().Reward}
}

// PairLine is one preference pair. prompt, chosen and rejected are the
// conversational preference columns TRL's DPOTrainer reads (the prompt's
// messages, then a one-message assistant completion each); with
// chosen_reward and rejected_reward it is also OpenRLHF's preference layout
// (--apply_chat_template --prompt_key prompt --chosen_key chosen
// --rejected_key rejected appends chosen/rejected to the prompt's messages).
type PairLine struct {
	Prompt         []expand.Message `json:"prompt"`
	Chosen         []Message        `json:"chosen"`
	Rejected       []Message        `json:"rejected"`
	ChosenReward   float64          `json:"chosen_reward"`
	RejectedReward float64          `json:"rejected_reward"`
	ID             string           `json:"id"`
	Domain         string           `json:"domain"`
	ChosenID       string           `json:"chosen_id"`
	RejectedID     string           `json:"rejected_id"`
}

func pairLine(s *expand.Sample, chosen, rejected *Candidate, th Thinking) PairLine {
	return PairLine{Prompt: s.Prompt(), Chosen: []Message{chosen.assistant(th)}, Rejected: []Message{rejected.assistant(th)},
		ChosenReward: chosen.beam().Reward, RejectedReward: rejected.beam().Reward, ID: s.ID, Domain: s.Domain,
		ChosenID: chosen.ID, RejectedID: rejected.ID}
}
