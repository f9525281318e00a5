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
	// Prompt is the action the prediction answers (the judge's "current
	// turn"); "" when unknown.
	Prompt      string `json:"prompt,omitempty"`
	Response    string `json:"response"`
	GroundTruth string `json:"ground_truth"`
	// ExtraInfo may carry "record" (a whole AgentWorldBench record, whose
	// history the judge then sees; its ground truth is the record's unless
	// GroundTruth is set) and "action" (the action prompt, when Prompt is
	// empty, as data export writes it).
	ExtraInfo json.RawMessage `json:"extra_info,omitempty"`
	// Record, when set, is what extra_info's "record" would carry, for a
	// caller in this process that has the record at hand: it is used
	// instead of ExtraInfo, without encoding and decoding it per item.
	// It is never serialized.
	Record *trajectory.Record `json:"-"`
}

// extraInfo is the part of ExtraInfo the reward reads.
type extraInfo struct {
	Record *trajectory.Record `json:"record,omitempty"`
	Action string             `json:"action,omitempty"`
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
