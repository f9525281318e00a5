package realenv

import (
	"context"
	"errors"
	"time"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/sandbox"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Sentinel errors of real environments, matched with errors.Is.
var (
	// ErrUnavailable means the environment cannot start on this machine
	// (bwrap or tmux missing, user namespaces refused, node missing, …);
	// the sandbox reports it.
	ErrUnavailable = sandbox.ErrUnavailable
	// ErrBroken means the environment died (MCP server crashed, sandbox
	// gone) and cannot take more steps; the recording stays.
	ErrBroken = errors.New("environment broken")
	// ErrEnded means a step came after the episode ended.
	ErrEnded = errors.New("episode ended")
)

// Env is one live real environment. An agent-facing session calls Start
// once, then Step per action, then Close. Implementations serialize calls.
type Env interface {
	// Domain is the environment's domain (terminal, mcp).
	Domain() domain.Domain
	// Start brings the environment up and returns the first observation.
	Start(ctx context.Context) (string, error)
	// Step performs one action and returns what the environment showed.
	// A malformed action is a fielderr.Error of kind
	// conversation.ErrBadAction and changes nothing.
	Step(ctx context.Context, action string) (StepResult, error)
	// Components describes the environment in the five parts of the unified
	// schema (task description, action space, initial state, …); valid after
	// Start.
	Components() trajectory.Components
	// Close stops every process the environment started.
	Close() error
}

// StepResult is the outcome of one action.
type StepResult struct {
	Observation string
	// Terminated is set when the episode ended (terminal `[]`, shell exit).
	Terminated bool
	// Broken is set when the environment died during the step; Observation
	// then describes the failure and Error carries the cause.
	Broken bool
	Error  string
	// Latency is the wall time of the step.
	Latency time.Duration
}
