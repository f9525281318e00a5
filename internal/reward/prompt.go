package reward

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Message is one chat message of a prompt as a trainer sends it. Content
// may arrive as a string or as a list of parts ({type: text|input_text|
// output_text, text}); it is kept as the text of those parts.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// UnmarshalJSON reads a message whose content is a string or a list of
// parts (Responses API input items and multimodal chat messages).
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	m.Role, m.Content = raw.Role, contentText(raw.Content)
	return nil
}

// decodePrompt reads a prompt given as text or as a list of messages.
func decodePrompt(raw json.RawMessage) (text string, msgs []Message, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	if json.Unmarshal(raw, &text) == nil {
		return text, nil, nil
	}
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return "", nil, errors.New("want a string or a list of {role, content} messages")
	}
	return "", msgs, nil
}

// chatTemplates are the turn markers of the chat templates whose rendered
// prompts the reward reads back into messages (OpenRLHF sends its prompts
// rendered): ChatML (Qwen and many others), Llama 3 and Gemma. Each turn
// is open, role, a separator, content, close.
// Llama 3's template trims each message, so a history rendered by it
// equals a record's only up to the white space at either end of a message.
var chatTemplates = []struct{ open, sep, close string }{
	{open: "<|im_start|>", sep: "\n", close: "<|im_end|>"},
	{open: "<|start_header_id|>", sep: "<|end_header_id|>\n\n", close: "<|eot_id|>"},
	{open: "<start_of_turn>", sep: "\n", close: "<end_of_turn>"},
}

// splitChatTemplate reads a rendered chat prompt back into its messages;
// ok is false when s uses none of the known templates. The generation
// prompt the template ends with (an assistant turn left open) is not a
// message and is dropped, as is anything before the first turn (a BOS
// token). Gemma's "model" role reads as "assistant".
func splitChatTemplate(s string) (msgs []Message, ok bool) {
	for _, t := range chatTemplates {
		if !strings.Contains(s, t.open) || !strings.Contains(s, t.close) {
			continue
		}
		for _, part := range strings.Split(s, t.open)[1:] {
			role, rest, found := strings.Cut(part, t.sep)
			if !found {
				continue
			}
			content, closed := strings.CutSuffix(strings.TrimRight(rest, "\n"), t.close)
			if !closed {
				if i := strings.Index(rest, t.close); i >= 0 {
					content, closed = rest[:i], true
				}
			}
			if !closed {
				continue // the open generation prompt
			}
			if role == "model" {
				role = "assistant"
			}
			msgs = append(msgs, Message{Role: strings.TrimSpace(role), Content: content})
		}
		return msgs, len(msgs) > 0
	}
	return nil, false
}

// recordFromMessages rebuilds the judge's record from an RL prompt given as
// chat messages, the way `data export --mode rl` writes it (dataset
// Sample.Prompt): the system prompt (not read: the judge has its own), each
// earlier turn as a user message and the assistant message answering it,
// then the current action as the last user message. A user message is read
// back into the action prompt a record holds ("### Turn N\n**Action:**\n…",
// without the answer reminder, the world state or the control text), an
// assistant message is the observation as the record's response holds it,
// so the judge sees the same history and current turn as `bench judge`
// does for the record the sample came from.
func recordFromMessages(msgs []Message, task, id, truth string) (*trajectory.Record, error) {
	rec := &trajectory.Record{Task: task, ID: trajectory.StringID(id)}
	var pending *string // the last user message not yet answered
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "":
			// The judge has its own system prompt; an input item without a
			// role (a Responses API reasoning or call item) is no turn.
		case "user":
			if pending != nil {
				return nil, fmt.Errorf("%w: prompt[%d]: two user messages in a row (want user and assistant messages taking turns)", errInvalidItem, i)
			}
			a := userAction(m.Content)
			pending = &a
		case "assistant":
			if pending == nil {
				return nil, fmt.Errorf("%w: prompt[%d]: an assistant message answers no user message", errInvalidItem, i)
			}
			rec.Prompt = append(rec.Prompt, *pending)
			rec.Response = append(rec.Response, m.Content)
			pending = nil
		default:
			return nil, fmt.Errorf("%w: prompt[%d]: role %q (want system, user or assistant)", errInvalidItem, i, m.Role)
		}
	}
	if pending == nil {
		return nil, fmt.Errorf("%w: prompt: the last turn must be a user message (the action to predict)", errInvalidItem)
	}
	rec.Prompt = append(rec.Prompt, *pending)
	rec.Response = append(rec.Response, truth)
	rec.CurrentPrompt = *pending
	rec.TurnIdx = len(rec.Prompt)
	rec.TotalTurns = rec.TurnIdx
	return rec, nil
}

// userAction reads a user message back into its action prompt:
// the message without its answer reminder; with world state or control
// text (which only the simulator's newest message carries), the action
// prompt alone. A message in no known form is the action as it is.
func userAction(msg string) string {
	body, ok := strings.CutSuffix(msg, "\n\n"+conversation.AnswerReminder)
	if !ok {
		return msg
	}
	if k, action, world, control, err := conversation.ParseUserMessage(msg); err == nil && (world != "" || control != "") {
		return conversation.ActionPrompt(k, action)
	}
	return body
}
