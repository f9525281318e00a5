package reward

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Item is one prediction to score: the policy's raw generation (Response)
// against the real observation (GroundTruth).
type Item struct {
	ID      string `json:"id"`
	GroupID string `json:"group_id,omitempty"`
	// DataSource names the domain: "agentworld/terminal" as data export
	// writes it, a bare domain name, or any task path whose last part is
	// the domain. An unknown domain is judged with the generic judge prompt
	// and verified by the domain-independent rules only.
	DataSource string `json:"data_source"`
	// Prompt is the prompt as text: a chat-templated rendering of the
	// RL prompt's messages (read back into them, see Messages), or else
	// the action the prediction answers (the judge's "current turn"); ""
	// when unknown. In JSON, "prompt" is this text or the Messages.
	Prompt string `json:"-"`
	// Messages is the prompt as chat messages, as `data export --mode rl`
	// writes an RL row's prompt: the system prompt, the earlier turns as
	// user and assistant messages, the current action last. The judge
	// then sees that history and current turn exactly as `bench judge`
	// sees the record the row came from.
	Messages    []Message `json:"-"`
	Response    string    `json:"response"`
	GroundTruth string    `json:"ground_truth"`
	// ExtraInfo may carry "record" (a whole AgentWorldBench record, whose
	// history the judge then sees; its ground truth is the record's unless
	// GroundTruth is set), "messages" (the RL row's prompt turns, for
	// trainers that hand a reward function extra_info but not the prompt:
	// verl) and "action" (the action prompt, the last resort).
	ExtraInfo json.RawMessage `json:"extra_info,omitempty"`
	// Record, when set, is what extra_info's "record" would carry, for a
	// caller in this process that has the record at hand: it is used
	// instead of ExtraInfo, without encoding and decoding it per item.
	// It is never serialized.
	Record *trajectory.Record `json:"-"`
}

// itemJSON is Item's wire form: prompt is text or messages.
type itemJSON struct {
	ID          string          `json:"id"`
	GroupID     string          `json:"group_id,omitempty"`
	DataSource  string          `json:"data_source"`
	Prompt      json.RawMessage `json:"prompt,omitempty"`
	Response    string          `json:"response"`
	GroundTruth string          `json:"ground_truth"`
	ExtraInfo   json.RawMessage `json:"extra_info,omitempty"`
}

// UnmarshalJSON reads an item whose prompt is text or chat messages.
func (it *Item) UnmarshalJSON(b []byte) error {
	var w itemJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	text, msgs, err := decodePrompt(w.Prompt)
	if err != nil {
		return fmt.Errorf("prompt: %w", err)
	}
	*it = Item{ID: w.ID, GroupID: w.GroupID, DataSource: w.DataSource, Prompt: text, Messages: msgs,
		Response: w.Response, GroundTruth: w.GroundTruth, ExtraInfo: w.ExtraInfo}
	return nil
}

// MarshalJSON writes the prompt as messages when there are any.
func (it Item) MarshalJSON() ([]byte, error) {
	w := itemJSON{ID: it.ID, GroupID: it.GroupID, DataSource: it.DataSource, Response: it.Response, GroundTruth: it.GroundTruth, ExtraInfo: it.ExtraInfo}
	var err error
	switch {
	case len(it.Messages) > 0:
		w.Prompt, err = json.Marshal(it.Messages)
	case it.Prompt != "":
		w.Prompt, err = json.Marshal(it.Prompt)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// extraInfo is the part of ExtraInfo the reward reads.
type extraInfo struct {
	Record   *trajectory.Record `json:"record,omitempty"`
	Messages []Message          `json:"messages,omitempty"`
	Action   string             `json:"action,omitempty"`
}

// errInvalidItem marks items that cannot be scored at all.
var errInvalidItem = errors.New("invalid item")

// record builds the judge's view of an item: its history (when the item
// carries a record), the action and the ground truth.
func (it *Item) record() (*trajectory.Record, error) {
	var ex extraInfo
	if it.Record != nil {
		ex.Record = it.Record
	} else if len(it.ExtraInfo) > 0 && string(it.ExtraInfo) != "null" {
		// extra_info is free-form in every trainer; only an object can
		// carry the fields read here, anything else is ignored.
		if trimmed := strings.TrimSpace(string(it.ExtraInfo)); strings.HasPrefix(trimmed, "{") {
			if err := json.Unmarshal(it.ExtraInfo, &ex); err != nil {
				return nil, fmt.Errorf("%w: extra_info: %v", errInvalidItem, err)
			}
		}
	}
	if ex.Record != nil {
		rec := *ex.Record
		if err := rec.Validate(); err != nil {
			return nil, fmt.Errorf("%w: extra_info.record: %v", errInvalidItem, err)
		}
		if it.GroundTruth != "" {
			rec.Response = append([]string(nil), rec.Response...)
			rec.Response[rec.TurnIdx-1] = it.GroundTruth
		}
		if it.DataSource != "" {
			rec.Task = it.DataSource
		}
		return &rec, nil
	}
	if it.GroundTruth == "" {
		return nil, fmt.Errorf("%w: ground_truth is empty (the judge always needs the real observation)", errInvalidItem)
	}
	msgs := it.Messages
	if len(msgs) == 0 && it.Prompt != "" {
		msgs, _ = splitChatTemplate(it.Prompt)
	}
	if len(msgs) == 0 {
		msgs = ex.Messages
	}
	if len(msgs) > 0 {
		return recordFromMessages(msgs, it.DataSource, it.ID, it.GroundTruth)
	}
	action := it.Prompt
	if action == "" {
		action = ex.Action
	}
	return &trajectory.Record{
		Task:          it.DataSource,
		ID:            trajectory.StringID(it.ID),
		Prompt:        []string{action},
		Response:      []string{it.GroundTruth},
		CurrentPrompt: action,
		TurnIdx:       1,
		TotalTurns:    1,
	}, nil
}

// Domain is the item's domain as DataSource names it.
func (it *Item) Domain() domain.Domain { return domain.FromTask(it.DataSource) }

// setPromptText sets a prompt a trainer sent as text: a chat-templated
// rendering (OpenRLHF's prompts) is read back into its messages; other text
// is read as a rendered prompt whose last "### Turn" block is the current
// action (actionOf).
func (it *Item) setPromptText(s string) {
	if msgs, ok := splitChatTemplate(s); ok {
		it.Messages = msgs
		return
	}
	it.Prompt = actionOf(s)
}

// setPrompt sets a prompt given as text or as messages.
func (it *Item) setPrompt(text string, msgs []Message) {
	if len(msgs) > 0 {
		it.Messages = msgs
		return
	}
	it.setPromptText(text)
}
