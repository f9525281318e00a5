package trainset

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/tokencount"
)

// sampledRNG is the seeded draw of a sampled-set line for the formats that
// approximate weights by sampling: it depends on the seed and the beam
// only, never on file order or worker count.
func sampledRNG(seed uint64, s *expand.Sample) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00sft-sample", s.Teacher.Beam)
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// sampleConversation is a sample as one conversation: its prompt (the
// history in the form the simulator sends) and its target.
func sampleConversation(s *expand.Sample) []expand.Message {
	return append(s.Prompt(), expand.Message{Role: "assistant", Content: s.Target()})
}

// SampledSwiftLineOf is the ms-swift line of one sample of the sampled set:
// the history observations are context (loss false, loss_scale 0) and only
// the target, with the teacher's reasoning inline, trains, at the sample's
// weight. Weights and Categories list every assistant message.
func SampledSwiftLineOf(s *expand.Sample) SwiftLine {
	l := SwiftLine{ID: s.Teacher.Beam, Domain: s.Domain, Template: s.Template, TemplateID: s.TemplateID}
	msgs := sampleConversation(s)
	for k, m := range msgs {
		sm := SwiftMessage{Role: m.Role, Content: m.Content}
		if m.Role == "assistant" {
			w, cat := 0.0, "history"
			if k == len(msgs)-1 {
				w, cat = s.Weight, s.Category
			}
			sm.LossScale = &w
			if w == 0 {
				no := false
				sm.Loss = &no
			}
			l.Weights = append(l.Weights, w)
			l.Categories = append(l.Categories, cat)
		}
		l.Messages = append(l.Messages, sm)
	}
	return l
}

// SampledLFLineOf is the LLaMA-Factory v1 line of one sample of the sampled
// set: history observations weigh 0, the target the sample's weight, and
// the teacher's reasoning is the target's "reasoning" content block, which
// the v1 engine hands the chat template as reasoning_content.
func SampledLFLineOf(s *expand.Sample) LFLine {
	l := LFLine{ID: s.Teacher.Beam, Domain: s.Domain, Template: s.Template, TemplateID: s.TemplateID}
	prompt := s.Prompt()
	for _, m := range prompt {
		lm := LFMessage{Role: m.Role, Content: []LFContent{{Type: "text", Value: m.Content}}}
		if m.Role == "assistant" {
			l.Categories = append(l.Categories, "history")
		}
		l.Messages = append(l.Messages, lm)
	}
	target := LFMessage{Role: "assistant", LossWeight: s.Weight}
	if r := s.Reasoning(); r != "" {
		target.Content = append(target.Content, LFContent{Type: "reasoning", Value: r})
	}
	target.Content = append(target.Content, LFContent{Type: "text", Value: conversation.Answer(s.Observation)})
	l.Messages = append(l.Messages, target)
	l.Categories = append(l.Categories, s.Category)
	return l
}

// SampledCPTDocument renders a sample of the sampled set as a pretraining
// document: the system prompt and the history as CPTDocument renders a
// trajectory, then the current action and the teacher's answer, its
// reasoning inline before the observation.
func SampledCPTDocument(s *expand.Sample) string {
	var b strings.Builder
	b.WriteString(CPTDocument(s.System, s.History))
	if b.Len() > 0 {
		b.WriteString("\n\n")
	}
	b.WriteString(conversation.ActionPrompt(s.Turn, s.Action))
	b.WriteString("\n\n")
	b.WriteString(expand.InlineReasoning(s.Reasoning(), conversation.ObservationResponse(s.Observation)))
	return b.String()
}

// sampledCPTItems renders a batch of sampled-set lines as CPT documents.
func sampledCPTItems(batch []datapipe.InLine) ([]cptItem, []*datapipe.RecordError, int64, error) {
	var items []cptItem
	errs, ok, err := expand.EachSampled(batch, func(_ *datapipe.InLine, s *expand.Sample) error {
		text := SampledCPTDocument(s)
		items = append(items, cptItem{hash: sha256Of(text), line: CPTLine{
			Text: text, Source: "trajectory", ID: s.Teacher.Beam, Domain: s.Domain, Template: s.Template, TemplateID: s.TemplateID, Tokens: tokencount.Estimate(text),
		}})
		return nil
	})
	return items, errs, ok, err
}
