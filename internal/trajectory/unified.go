package trajectory

import (
	"encoding/json"
	"fmt"
	"strings"
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
