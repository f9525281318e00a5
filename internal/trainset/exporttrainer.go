package trainset

import (
	"crypto/sha256"
	"fmt"
	"math"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/expand"
)

// Trainer names the SFT trainer a `--mode sft` export is shaped for. The
// trainers differ in what they read for a per-turn loss weight, so each gets
// the form it honours; docs/masking.md cites the trainer source each form
// was read from.
type Trainer int

const (
	// TrainerSwift (the default) writes one multi-turn sample per
	// trajectory for ms-swift: every observation is an assistant message
	// carrying its turn's weight as "loss_scale" (and "loss": false when
	// the weight is 0). Exact, with `--is_binary_loss_scale false`.
	TrainerSwift Trainer = iota
	// TrainerLlamaFactory writes one multi-turn sample per trajectory in
	// LLaMA-Factory's v1 native layout (content blocks, "loss_weight" on
	// every message). Exact on the v1 engine.
	TrainerLlamaFactory
	// TrainerLlamaFactoryV0 writes per-turn OpenAI-style chat lines (the
	// layout of FormatChat) for LLaMA-Factory's classic engine, which reads
	// no weight: turn k is written with probability min(w_k, 1) (and
	// ⌊w_k⌋ or ⌈w_k⌉ times above 1), drawn from --seed.
	TrainerLlamaFactoryV0
	// TrainerTRL writes per-turn conversational prompt-completion lines for
	// TRL's SFTTrainer (loss on the completion only), which reads no
	// weight: the same seeded sampling as TrainerLlamaFactoryV0.
	TrainerTRL
	// TrainerChat is the older per-turn chat line (FormatChat): every turn,
	// a boolean "loss" on the target and the weight in a top-level
	// "loss_weight" that ms-swift and LLaMA-Factory ignore.
	TrainerChat
)

var trainerNames = []string{"swift", "llamafactory", "llamafactory-v0", "trl", "chat"}

// ParseTrainer accepts swift, llamafactory, llamafactory-v0, trl or chat;
// "" means swift.
func ParseTrainer(s string) (Trainer, error) {
	if s == "" {
		return TrainerSwift, nil
	}
	for i, n := range trainerNames {
		if s == n {
			return Trainer(i), nil
		}
	}
	return TrainerSwift, fmt.Errorf("unknown trainer %q (want swift, llamafactory, llamafactory-v0, trl or chat)", s)
}

func (t Trainer) String() string {
	if int(t) < len(trainerNames) {
		return trainerNames[t]
	}
	return fmt.Sprintf("Trainer(%d)", int(t))
}

// Format is the export layout a trainer's SFT file uses.
func (t Trainer) Format() Format {
	switch t {
	case TrainerLlamaFactory:
		return FormatLlamaFactory
	case TrainerLlamaFactoryV0:
		return FormatChatSampled
	case TrainerTRL:
		return FormatTRL
	case TrainerChat:
		return FormatChat
	}
	return FormatSwift
}

// Exact reports whether the trainer applies the weights as written; false
// means they are approximated by seeded turn sampling.
func (t Trainer) Exact() bool { return t == TrainerSwift || t == TrainerLlamaFactory }

// perTrajectory reports whether a format writes one line per trajectory.
func (f Format) perTrajectory() bool { return f == FormatSwift || f == FormatLlamaFactory }

// sampled reports whether a format approximates weights by turn sampling.
func (f Format) sampled() bool { return f == FormatChatSampled || f == FormatTRL }

// SwiftMessage is a message of a SwiftLine. LossScale is set on assistant
// messages only: ms-swift (≥ 4.2.0) multiplies the token loss of that
// message by it when run with --is_binary_loss_scale false; Loss false
// keeps a weight-0 message out of the labels altogether.
type SwiftMessage struct {
	Role      string   `json:"role"`
	Content   string   `json:"content"`
	Loss      *bool    `json:"loss,omitempty"`
	LossScale *float64 `json:"loss_scale,omitempty"`
}

// SwiftLine is one trajectory as an ms-swift sample: system, then per turn
// a user message (the action) and an assistant message (the tagged
// observation) weighted by its masking category. Weights and Categories
// repeat the per-turn values (index k is turn k+1) for filtering and
// checking; ms-swift reads only messages.
type SwiftLine struct {
	Messages   []SwiftMessage `json:"messages"`
	ID         string         `json:"id"`
	Domain     string         `json:"domain"`
	Template   string         `json:"template,omitempty"`
	TemplateID string         `json:"template_id,omitempty"`
	Weights    []float64      `json:"weights"`
	Categories []string       `json:"categories"`
}

// LFContent is a content block of LLaMA-Factory's v1 message.
type LFContent struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// LFMessage is a message in LLaMA-Factory's v1 native layout. The v1 data
// engine cuts a conversation after every assistant message whose
// loss_weight exceeds 1e-6 and trains each cut on its last message with
// that weight per token; system and user messages carry 0.
type LFMessage struct {
	Role       string      `json:"role"`
	Content    []LFContent `json:"content"`
	LossWeight float64     `json:"loss_weight"`
}

// LFLine is one trajectory as a LLaMA-Factory v1 sample.
type LFLine struct {
	Messages   []LFMessage `json:"messages"`
	ID         string      `json:"id"`
	Domain     string      `json:"domain"`
	Template   string      `json:"template,omitempty"`
	TemplateID string      `json:"template_id,omitempty"`
	Categories []string    `json:"categories"`
}

// TRLLine is one turn as a TRL conversational prompt-completion sample:
// SFTTrainer computes the loss on the completion only (its default for
// this layout). LossWeight is informational; TRL does not read it.
type TRLLine struct {
	Prompt     []expand.Message `json:"prompt"`
	Completion []expand.Message `json:"completion"`
	ID         string           `json:"id"`
	Domain     string           `json:"domain"`
	Turn       int              `json:"turn"`
	Category   string           `json:"category"`
	LossWeight float64          `json:"loss_weight"`
	Template   string           `json:"template,omitempty"`
	TemplateID string           `json:"template_id,omitempty"`
}

// TRLLineOf builds the TRL line of a sample.
func TRLLineOf(s *expand.Sample) TRLLine {
	return TRLLine{
		Prompt:     s.Prompt(),
		Completion: []expand.Message{{Role: "assistant", Content: s.Target()}},
		ID:         s.ID, Domain: s.Domain, Turn: s.Turn, Category: s.Category,
		LossWeight: s.Weight, Template: s.Template, TemplateID: s.TemplateID,
	}
}

// trajectoryMessages renders the samples of one trajectory (all its turns,
// in order) as one conversation: the system prompt of the first sample,
// then each turn's user message and its tagged target. Every observation is
// a training target here, so each is written as the target of its own turn
// (conversation.Answer), not in the marker form the per-turn samples give
// history; see docs/masking.md.
func trajectoryMessages(samples []*expand.Sample) []expand.Message {
	first := samples[0]
	msgs := make([]expand.Message, 0, 2*len(samples)+1)
	if first.System != "" {
		msgs = append(msgs, expand.Message{Role: "system", Content: first.System})
	}
	for _, s := range samples {
		msgs = append(msgs,
			expand.Message{Role: "user", Content: conversation.UserMessage(s.Turn, s.Action, "", "")},
			expand.Message{Role: "assistant", Content: s.Target()})
	}
	return msgs
}

// SwiftLineOf builds the ms-swift line of one trajectory's samples.
func SwiftLineOf(samples []*expand.Sample) SwiftLine {
	first := samples[0]
	l := SwiftLine{ID: first.TrajectoryID, Domain: first.Domain, Template: first.Template, TemplateID: first.TemplateID}
	k := 0
	for _, m := range trajectoryMessages(samples) {
		sm := SwiftMessage{Role: m.Role, Content: m.Content}
		if m.Role == "assistant" {
			w := samples[k].Weight
			sm.LossScale = &w
			if w == 0 {
				no := false
				sm.Loss = &no
			}
			l.Weights = append(l.Weights, w)
			l.Categories = append(l.Categories, samples[k].Category)
			k++
		}
		l.Messages = append(l.Messages, sm)
	}
	return l
}

// LFLineOf builds the LLaMA-Factory v1 line of one trajectory's samples.
func LFLineOf(samples []*expand.Sample) LFLine {
	first := samples[0]
	l := LFLine{ID: first.TrajectoryID, Domain: first.Domain, Template: first.Template, TemplateID: first.TemplateID}
	k := 0
	for _, m := range trajectoryMessages(samples) {
		lm := LFMessage{Role: m.Role, Content: []LFContent{{Type: "text", Value: m.Content}}}
		if m.Role == "assistant" {
			lm.LossWeight = samples[k].Weight
			l.Categories = append(l.Categories, samples[k].Category)
			k++
		}
		l.Messages = append(l.Messages, lm)
	}
	return l
}

// trajectoryHash identifies a trajectory line by what a trainer sees: the
// system prompt and every turn.
func trajectoryHash(samples []*expand.Sample) [16]byte {
	h := sha256.New()
	for _, m := range trajectoryMessages(samples) {
		fmt.Fprintf(h, "%d:%s\x00", len(m.Content), m.Content)
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}

// sampledCopies is how many times a turn of weight w is written when a
// trainer reads no weights: ⌊w⌋ copies plus one more with probability
// w − ⌊w⌋, u being a uniform draw in [0, 1). The expected count is w, so
// the expected loss a turn contributes is proportional to its weight.
func sampledCopies(w, u float64) int {
	if !(w > 0) {
		return 0
	}
	n := math.Floor(w)
	if u < w-n {
		n++
	}
	return int(n)
}
