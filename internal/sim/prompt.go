package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/tokencount"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Components renders a spec's five components as text.
func Components(s *world.Spec) trajectory.Components {
	c := trajectory.Components{
		TaskDescription:       s.TaskDescription,
		ActionSpace:           RenderActionSpace(s.ActionSpace),
		InitialState:          s.InitialState,
		SimulationInstruction: s.SimulationInstruction,
	}
	// A fictional world's facts are part of every session's starting state.
	if f := s.Facts.Render(); f != "" {
		c.InitialState = strings.TrimSpace(strings.TrimSpace(c.InitialState) + "\n\n" + f)
	}
	for _, d := range s.Demonstrations {
		c.Demonstrations = append(c.Demonstrations, trajectory.Demonstration{Action: d.Action, Observation: d.Observation})
	}
	return c
}

// RenderActionSpace writes tool definitions as one JSON object per line
// (name, description, input_schema in that order; schemas compacted) after
// the textual action list, so equal specs render to equal bytes.
func RenderActionSpace(a world.ActionSpace) string {
	var b strings.Builder
	if d := strings.TrimSpace(a.Description); d != "" {
		b.WriteString(d)
	}
	if len(a.Tools) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("Tools (one JSON definition per line):\n")
		for _, t := range a.Tools {
			type def struct {
				Name         string          `json:"name"`
				Description  string          `json:"description,omitempty"`
				InputSchema  json.RawMessage `json:"input_schema,omitempty"`
				OutputSchema json.RawMessage `json:"output_schema,omitempty"`
			}
			d := def{Name: t.Name, Description: t.Description, InputSchema: compactJSON(t.InputSchema), OutputSchema: compactJSON(t.OutputSchema)}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(d)
			b.Write(buf.Bytes())
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func compactJSON(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return nil
	}
	c, err := conversation.CanonicalJSON(string(r))
	if err != nil {
		return r
	}
	return json.RawMessage(c)
}

// SystemPrompt assembles the world-model system prompt of a spec from the
// domain template. It is computed once per session and never changes.
func SystemPrompt(s *world.Spec) (string, error) {
	return trajectory.WorldSystemPrompt(s.Domain, Components(s))
}

// TokenCounter estimates the tokens of a text.
type TokenCounter func(string) int

// messageOverhead is the per-message token cost of chat templates (role
// markers, separators).
const messageOverhead = 4

// Budget decides which history a request shows.
//
// Truncation strategy: the system prompt and the newest message are always
// sent. When system prompt + shown history + newest message exceeds Limit
// tokens, the oldest shown turns (user+assistant pairs) are dropped until
// the total is at most LowWater tokens, and a one-line note at the start of
// the first shown message says how many turns are hidden. Because a cut
// drops down to LowWater rather than just under Limit, the next cut comes
// only after (Limit-LowWater) tokens of new turns: cuts are rare and happen
// in chunks, and between cuts every request extends the previous one byte
// for byte. The cut is a pure function of the recorded history, so a
// resumed or forked session cuts exactly where the original would.
type Budget struct {
	// Limit is the prompt budget in tokens; <= 0 means no truncation.
	Limit int
	// LowWater is where a cut brings the prompt down to; 0 means 3/4 of
	// Limit.
	LowWater int
	// Count counts tokens; nil means tokencount.Estimate.
	Count TokenCounter
}

// budgetState tracks the cut incrementally across a session's steps.
type budgetState struct {
	b      Budget
	cut    int   // turns hidden
	tokens []int // per recorded turn: user+assistant tokens
	shown  int   // the sum of tokens[cut:]
	sys    int
}

func newBudgetState(b Budget, system string) *budgetState {
	if b.Count == nil {
		b.Count = tokencount.Estimate
	}
	if b.LowWater <= 0 || b.LowWater > b.Limit {
		b.LowWater = b.Limit * 3 / 4
	}
	return &budgetState{b: b, sys: b.Count(system) + messageOverhead}
}

func (bs *budgetState) turnTokens(h HistoryTurn) int {
	return bs.b.Count(h.Message) + bs.b.Count(h.Assistant) + 2*messageOverhead
}

// sync records turns the state has not seen yet (after a resume, or the
// turn answered last step).
func (bs *budgetState) sync(history []HistoryTurn) {
	for len(bs.tokens) < len(history) {
		bs.add(bs.turnTokens(history[len(bs.tokens)]))
	}
}

// add records the next turn's tokens.
func (bs *budgetState) add(t int) {
	bs.tokens = append(bs.tokens, t)
	bs.shown += t
}

// place decides the cut for a request whose newest message costs newTok,
// given all earlier turns; it reports whether the cut moved.
func (bs *budgetState) place(newTok int) bool {
	if bs.b.Limit <= 0 {
		return false
	}
	total := bs.sys + newTok + bs.shown
	if total <= bs.b.Limit {
		return false
	}
	moved := false
	for bs.cut < len(bs.tokens) && total > bs.b.LowWater {
		total -= bs.tokens[bs.cut]
		bs.shown -= bs.tokens[bs.cut]
		bs.cut++
		moved = true
	}
	return moved
}

// replay recomputes the cut over a recorded history, turn by turn, exactly
// as live steps placed it.
func (bs *budgetState) replay(history []HistoryTurn) {
	for i := range history {
		bs.place(bs.b.Count(history[i].Message) + messageOverhead)
		bs.add(bs.turnTokens(history[i]))
	}
}

// truncationNote opens the first shown message after a cut.
func truncationNote(cut int) string {
	if cut == 1 {
		return "[Turn 1 is not shown: the conversation exceeds the context budget.]\n\n"
	}
	return fmt.Sprintf("[Turns 1-%d are not shown: the conversation exceeds the context budget.]\n\n", cut)
}

// BuildMessages assembles the chat request of a step: system prompt, the
// shown history, and the newest user message.
func BuildMessages(system string, history []HistoryTurn, cut int, newest string) []worldmodel.Message {
	msgs := make([]worldmodel.Message, 0, 2+2*(len(history)-cut))
	if system != "" {
		msgs = append(msgs, worldmodel.Message{Role: "system", Content: system})
	}
	for i := cut; i < len(history); i++ {
		u := history[i].Message
		if i == cut && cut > 0 {
			u = truncationNote(cut) + u
		}
		msgs = append(msgs, worldmodel.Message{Role: "user", Content: u}, worldmodel.Message{Role: "assistant", Content: history[i].Assistant})
	}
	u := newest
	if cut > 0 && cut == len(history) {
		u = truncationNote(cut) + u
	}
	return append(msgs, worldmodel.Message{Role: "user", Content: u})
}

// RenderTranscript serializes messages the way prefix checks compare them:
// each message as role, newline, content, newline. Request k+1 is prefix
// stable when the transcript of request k is a byte prefix of it.
func RenderTranscript(msgs []worldmodel.Message) []byte {
	n := 0
	for _, m := range msgs {
		n += len(m.Role) + len(m.Content) + 4
	}
	b := make([]byte, 0, n)
	for _, m := range msgs {
		b = append(b, "<|"...)
		b = append(b, m.Role...)
		b = append(b, "|>\n"...)
		b = append(b, m.Content...)
		b = append(b, '\n')
	}
	return b
}
