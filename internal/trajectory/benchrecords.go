package trajectory

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
)

// SystemPromptFunc renders the world-model system prompt of a domain from
// the five components. It is a parameter so that callers with their own
// prompt versions can export records that carry them.
type SystemPromptFunc func(d domain.Domain, c Components) (string, error)

// WorldSystemPrompt renders the domain's world-model system prompt from the
// five components with the templates the simulator uses, so a record built
// from a trajectory that carries only components holds the system prompt
// `agentworld serve` would send for it.
func WorldSystemPrompt(d domain.Domain, c Components) (string, error) {
	return domain.RenderWorldPrompt(d, domain.WorldPromptParts{
		TaskDescription:       c.TaskDescription,
		ActionSpace:           c.ActionSpace,
		InitialState:          c.InitialState,
		Demonstrations:        RenderDemonstrations(c.Demonstrations),
		SimulationInstruction: c.SimulationInstruction,
	})
}

// RenderDemonstrations writes few-shot example transitions the way the
// simulator's system prompt shows them: "## Example N", the action under
// "**Action:**", then the observation after the observation marker.
func RenderDemonstrations(ds []Demonstration) string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(conversation.Example(i+1, d.Action, d.Observation))
	}
	return b.String()
}

// RecordSystemPrompt chooses the system_str of records made from t: the
// trajectory's own rendered prompt when it has one (that is what produced
// its observations), otherwise its components rendered by sp (nil means
// WorldSystemPrompt) for its domain.
func (t *Trajectory) RecordSystemPrompt(sp SystemPromptFunc) (string, error) {
	if strings.TrimSpace(t.SystemPrompt) != "" {
		return t.SystemPrompt, nil
	}
	if t.Components == nil {
		return "", fmt.Errorf("%w: system_prompt or components", ErrMissingField)
	}
	d, err := domain.Parse(t.Domain)
	if err != nil {
		return "", err
	}
	if sp == nil {
		sp = WorldSystemPrompt
	}
	s, err := sp(d, *t.Components)
	if err != nil {
		return "", fmt.Errorf("system prompt: %w", err)
	}
	return s, nil
}

// Record extra fields that BenchRecords adds, so a record still names the
// trajectory it came from after it has been given a benchmark id.
const (
	// ExtraTrajectoryID holds the trajectory's own id.
	ExtraTrajectoryID = "trajectory_id"
	// ExtraSource holds the trajectory's source.
	ExtraSource = "source"
)

// BenchRecords turns a trajectory into AgentWorldBench records in the
// published format, one per turn: task is the canonical domain name; every
// record holds the whole prompt list (each action rendered by
// [conversation.ActionPrompt]) and response list (each observation rendered
// by [conversation.ObservationResponse]);
// current_prompt is the evaluated turn's prompt; system_str is chosen by
// RecordSystemPrompt. All records share the integer id (ids number
// trajectories, as in the published data); the trajectory's own id and
// source are kept as the extra fields ExtraTrajectoryID and ExtraSource.
//
// The evaluated prompt carries no answer-instruction suffix: the world-model
// system prompt already asks for the answer tag. A final action without an
// observation (the episode ended) makes no sample: its ground truth would be
// empty (see TrimUnanswered); t itself is not changed.
func BenchRecords(t *Trajectory, id int64, sp SystemPromptFunc) ([]*Record, error) {
	trimmed := *t
	trimmed.TrimUnanswered()
	t = &trimmed
	if len(t.Turns) == 0 {
		return nil, fmt.Errorf("trajectory %s: %w: turns (empty trajectory)", t.ID, ErrMissingField)
	}
	d, err := domain.Parse(t.Domain)
	if err != nil {
		return nil, fmt.Errorf("trajectory %s: %w", t.ID, err)
	}
	system, err := t.RecordSystemPrompt(sp)
	if err != nil {
		return nil, fmt.Errorf("trajectory %s: %w", t.ID, err)
	}
	prompts := make([]string, len(t.Turns))
	responses := make([]string, len(t.Turns))
	for i, tu := range t.Turns {
		prompts[i] = conversation.ActionPrompt(i+1, tu.Action)
		responses[i] = conversation.ObservationResponse(tu.Observation)
	}
	var extra []Field
	for _, kv := range [][2]string{{ExtraTrajectoryID, t.ID}, {ExtraSource, t.Source}} {
		if kv[1] != "" {
			b, _ := Marshal(kv[1])
			extra = append(extra, Field{Key: kv[0], Value: b})
		}
	}
	rid := IntID(strconv.FormatInt(id, 10))
	out := make([]*Record, len(t.Turns))
	for i := range t.Turns {
		out[i] = &Record{
			Task:          string(d),
			ID:            rid,
			Prompt:        prompts,
			Response:      responses,
			CurrentPrompt: prompts[i],
			SystemStr:     system,
			TurnIdx:       i + 1,
			TotalTurns:    len(t.Turns),
			Extra:         extra,
		}
		if err := out[i].Validate(); err != nil {
			return nil, fmt.Errorf("trajectory %s turn %d: %w", t.ID, i+1, err)
		}
	}
	return out, nil
}
