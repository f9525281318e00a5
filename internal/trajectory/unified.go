package trajectory

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentworld/agentworld/internal/fielderr"
)

// Trajectory is the unified environment trajectory schema shared by all
// seven domains: a system prompt (as its five components and/or as rendered
// text) followed by (action, observation) turns.
type Trajectory struct {
	// ID identifies the trajectory within its source.
	ID     string `json:"id"`
	Domain string `json:"domain"`
	// Source says where the trajectory came from ("agentworldbench",
	// "openai-chat", "session", "real:terminal", …).
	Source string `json:"source,omitempty"`
	// Components are the five parts the system prompt is assembled from;
	// nil when only the rendered prompt is known (published records).
	Components *Components `json:"components,omitempty"`
	// SystemPrompt is the rendered world-model system prompt, when known.
	SystemPrompt string `json:"system_prompt,omitempty"`
	Turns        []Turn `json:"turns"`
	// Meta carries source-specific fields through conversions untouched.
	Meta map[string]json.RawMessage `json:"meta,omitempty"`
}

// Components are the five parts of a world-model system prompt.
type Components struct {
	TaskDescription       string          `json:"task_description"`
	ActionSpace           string          `json:"action_space"`
	InitialState          string          `json:"initial_state,omitempty"`
	Demonstrations        []Demonstration `json:"demonstrations,omitempty"`
	SimulationInstruction string          `json:"simulation_instruction,omitempty"`
}

// Demonstration is one few-shot example transition.
type Demonstration struct {
	Action      string `json:"action"`
	Observation string `json:"observation"`
}

// Turn is one (action, observation) pair.
type Turn struct {
	Action      string `json:"action"`
	Observation string `json:"observation"`
	// Meta carries per-turn facts (latency, backend, perturbation labels,
	// divergence, …) without widening the schema.
	Meta map[string]json.RawMessage `json:"meta,omitempty"`
}

// Validate checks the invariants every consumer relies on and names the
// offending field.
func (t *Trajectory) Validate() error {
	if strings.TrimSpace(t.Domain) == "" {
		return fmt.Errorf("%w: domain", ErrMissingField)
	}
	if len(t.Turns) == 0 {
		return fmt.Errorf("%w: turns (empty trajectory)", ErrMissingField)
	}
	if t.Components == nil && strings.TrimSpace(t.SystemPrompt) == "" {
		return fmt.Errorf("%w: system_prompt or components", ErrMissingField)
	}
	for i, tu := range t.Turns {
		if strings.TrimSpace(tu.Action) == "" {
			return fmt.Errorf("%w: turns[%d].action", ErrMissingField, i)
		}
	}
	return nil
}

// Sentinel errors of the stricter training-data checks of Check.
var (
	// ErrMissingObservation means a turn has an action but no observation.
	ErrMissingObservation = errors.New("turn has an action but no observation")
	// ErrEmptyTurn means a turn has neither action nor observation.
	ErrEmptyTurn = errors.New("empty turn")
)

// TrimUnanswered drops the trailing turns that have an action but no
// observation and returns how many it dropped. An episode's last action
// (the terminal's [], Android's status, the desktop's DONE) often gets no
// observation because the environment ended; it teaches a world model
// nothing, and should not make the answered turns before it unusable.
// Unanswered turns in the middle, and a trajectory with no answered turn at
// all, are left for Check to report.
func (t *Trajectory) TrimUnanswered() int {
	n := len(t.Turns)
	for n > 0 && strings.TrimSpace(t.Turns[n-1].Observation) == "" && strings.TrimSpace(t.Turns[n-1].Action) != "" {
		n--
	}
	if n == 0 {
		return 0
	}
	dropped := len(t.Turns) - n
	t.Turns = t.Turns[:n:n]
	return dropped
}

// Check lists every problem that makes a trajectory unfit for training data,
// one per field: everything Validate requires, and in addition every turn
// needs an observation (an action left unanswered teaches nothing) and no
// turn may be empty. Whitespace-only text counts as empty.
func (t *Trajectory) Check() []*fielderr.Error {
	var out []*fielderr.Error
	add := func(field string, err error) { out = append(out, fielderr.Wrap(nil, field, err)) }
	if strings.TrimSpace(t.Domain) == "" {
		add("domain", ErrMissingField)
	}
	if len(t.Turns) == 0 {
		add("turns", fmt.Errorf("%w (empty trajectory)", ErrMissingField))
	}
	if t.Components == nil && strings.TrimSpace(t.SystemPrompt) == "" {
		add("system_prompt", fmt.Errorf("%w: system_prompt or components", ErrMissingField))
	}
	for i, tu := range t.Turns {
		act, obs := strings.TrimSpace(tu.Action) != "", strings.TrimSpace(tu.Observation) != ""
		switch {
		case !act && !obs:
			add(fmt.Sprintf("turns[%d]", i), ErrEmptyTurn)
		case !obs:
			add(fmt.Sprintf("turns[%d].observation", i), ErrMissingObservation)
		case !act:
			add(fmt.Sprintf("turns[%d].action", i), ErrMissingField)
		}
	}
	return out
}
