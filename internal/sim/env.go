// Package sim runs environment sessions: a session holds a world spec, a
// fixed system prompt and an append-only history of (action, observation)
// turns; every step asks an Environment for the next observation. The
// world-model simulator is one Environment (it assembles prefix-stable chat
// requests within a context budget); recorded-trajectory replay and real
// environments are others, plugged in by backend name. Sessions are
// persisted through a Store, can be forked, answer retried steps
// idempotently, and end by the rules of their domain.
package sim

import (
	"context"
	"encoding/json"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/world"
)

// Environment produces the observations of one session. It is the single
// extension point for what answers a step: the world-model simulator
// (backend "model"), record-and-replay ("replay"), and real environments
// ("real:terminal", "real:mcp", or a shadow wrapper) all implement it.
//
// The Manager owns the session's history and persistence; an Environment
// only answers. It is created by a BackendFactory when a session starts,
// and again — with the recorded history in SessionInfo.History — when a
// session is forked or resumed after a restart. An environment whose state
// cannot be rebuilt from the history (a real sandbox) may replay the
// actions or refuse with ErrNotResumable.
//
// Calls on one Environment never overlap: the Manager serializes steps of a
// session.
type Environment interface {
	// Reset returns the first observation of a new session (the screen or
	// state before turn 1). It is not called on fork or resume.
	Reset(ctx context.Context) (Observation, error)
	// Step answers one action. in.History holds every earlier turn exactly
	// as recorded.
	Step(ctx context.Context, in StepInput) (Observation, error)
	// Close releases the environment's resources; the session's record
	// stays in the store.
	Close() error
}

// EpisodeEnder is an Environment that scores the end of an episode, such
// as a real task whose check decides the reward. When an action ends the
// episode ([] on the terminal, DONE on a desktop) the Manager answers it
// without a step and calls EndEpisode with that final observation, which
// the environment may give a reward and reward components. An error is
// reported in info.error and leaves the reward 0.
type EpisodeEnder interface {
	EndEpisode(ctx context.Context, obs *Observation) error
}

// BackendFactory creates the Environment of a session. Register one per
// backend name with Options.Backends or Manager.RegisterBackend.
type BackendFactory func(ctx context.Context, s SessionInfo) (Environment, error)

// SessionInfo is what an Environment (and a StepHook) knows about its
// session.
type SessionInfo struct {
	ID string
	// Root is the session this one was forked from, transitively (its own
	// ID when not a fork); routers use it as the prefix-cache affinity key.
	Root string
	// Parent is the session this one was forked from, "" if none.
	Parent string
	Spec   *world.Spec
	// Inline is the content digest of a spec the client sent inline, ""
	// for a world the server loaded (see SessionRecord.Inline).
	Inline string
	// SystemPrompt is the session's fixed world-model system prompt.
	SystemPrompt string
	// Backend is the backend name the session runs on.
	Backend string
	// Model overrides the world model's name for this session when set.
	Model string
	Seed  *int64
	// Params carries free-form per-session settings given at creation
	// (e.g. "shadow", perturbation overrides); backends and hooks read the
	// keys they own.
	Params map[string]json.RawMessage
	// Labels are free-form session labels recorded with the trajectory.
	Labels map[string]string
	// InitialObservation is what Reset returned.
	InitialObservation string
	// History is the recorded turns when the environment is created for a
	// fork or a resumed session; empty for a new session.
	History []HistoryTurn
	// Replica is the model replica that served the latest recorded turn
	// that went to a routed model ("" if none): a resumed session (a
	// takeover on another node) asks it again, so every node places the
	// session where its prefix is cached (see worldmodel.WithReplica).
	Replica string
}

// HistoryTurn is one recorded turn as the next prompt will show it.
type HistoryTurn struct {
	Action string `json:"action"`
	// Observation is the text the agent received.
	Observation string `json:"observation"`
	// Message is the user message exactly as sent to the world model for
	// this turn (control and world-state text included), so later requests
	// repeat it byte for byte.
	Message string `json:"message,omitempty"`
	// Assistant is the assistant message that stands for the observation in
	// later requests.
	Assistant string `json:"assistant,omitempty"`
}

// StepInput is one step as an Environment sees it.
type StepInput struct {
	// Turn is the 1-based number of this step.
	Turn   int
	Action conversation.Action
	// History is every earlier turn, in order.
	History []HistoryTurn
	// Control is extra instruction text for this step only (a perturbation
	// rule's instruction). The world model receives it at the end of the
	// last user message, never in the system prompt or earlier messages,
	// so the request prefix stays stable.
	Control string
	// WorldState is state text for this step (e.g. facts a fictional
	// world's ledger holds), placed in the last user message before Control.
	WorldState string
	// Labels are recorded with the step (e.g. which perturbation rule
	// fired); environments may read them.
	Labels map[string]string
}

// Observation is an Environment's answer to a step.
type Observation struct {
	Text string
	// Terminated ends the episode (the environment says the task is over).
	Terminated bool
	Reward     float64
	// Broken means the environment died answering this step (a real
	// environment's process crashed): Text describes the failure, the
	// episode ends and the session is recorded with status broken.
	Broken bool
	// Message is the user message the world model received for this step;
	// empty when no model was asked, in which case the Manager records the
	// default rendering so later model requests stay consistent.
	Message string
	Info    StepInfo
}

// StepInfo is the per-step account returned to the agent in `info` and
// recorded with the turn.
type StepInfo struct {
	Turn      int   `json:"turn"`
	LatencyMS int64 `json:"latency_ms"`
	// Backend names what answered: "model", "replay", "cache", "spec",
	// "rule", "hook", "real:terminal", …
	Backend string `json:"backend"`
	// Replica is the model endpoint that served the request, when routed.
	Replica          string `json:"replica,omitempty"`
	Model            string `json:"model,omitempty"`
	PromptTokens     int    `json:"prompt_tokens,omitempty"`
	CompletionTokens int    `json:"completion_tokens,omitempty"`
	CachedTokens     int    `json:"cached_tokens,omitempty"`
	FinishReason     string `json:"finish_reason,omitempty"`
	// Reasoning is the model's thinking, kept out of the observation.
	Reasoning string `json:"reasoning,omitempty"`
	// Approximate marks an answer that is not an exact recorded transition
	// (replay's nearest neighbour).
	Approximate bool `json:"approximate,omitempty"`
	// Error explains an observation that is not a clean answer (an empty or
	// length-cut generation after its retry).
	Error string `json:"error,omitempty"`
	// RewardComponents are the parts the step's reward was made of (a real
	// task's check at termination: "task_check" 1 or 0); empty when the
	// reward is the plain 0 of a step nobody scored.
	RewardComponents map[string]float64 `json:"reward_components,omitempty"`
	// Retries counts extra generations this step needed (after an empty or
	// length-cut answer).
	Retries int `json:"retries,omitempty"`
	// TransportRetries counts HTTP attempts the model client repeated
	// inside this step's calls (429, 5xx, timeouts, dropped connections):
	// a step that succeeds slowly on a struggling server says so here.
	TransportRetries int `json:"transport_retries,omitempty"`
	// HistoryCut is the number of earliest turns left out of the prompt to
	// fit the context budget.
	HistoryCut int `json:"history_cut,omitempty"`
	// PrefixBreak reports a request that did not extend the previous one
	// although no truncation cut happened (should never be true).
	PrefixBreak bool `json:"prefix_break,omitempty"`
	// EndReason says why the episode ended at this step.
	EndReason string `json:"end_reason,omitempty"`
	// Labels are the step's labels (e.g. the perturbation rule that fired).
	Labels map[string]string `json:"labels,omitempty"`
	// Extra carries backend-specific facts (e.g. shadow-mode divergence).
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// StepResult is what a step returns: the Gymnasium-style tuple.
type StepResult struct {
	Observation string   `json:"observation"`
	Reward      float64  `json:"reward"`
	Terminated  bool     `json:"terminated"`
	Truncated   bool     `json:"truncated"`
	Info        StepInfo `json:"info"`
}

// StepHook lets a package act on every step of every session without
// editing the Manager: perturbation rules add control text or answer a
// step with a direct fault, a fictional world's ledger injects world state
// and learns facts from observations.
type StepHook interface {
	// BeforeStep runs before the environment is asked. It may edit in's
	// Control, WorldState and Labels. Returning a non-nil Observation
	// answers the step without calling the environment (a direct fault);
	// returning an error fails the step.
	BeforeStep(ctx context.Context, s SessionInfo, in *StepInput) (*Observation, error)
	// AfterStep sees each answered step, after it is recorded.
	AfterStep(ctx context.Context, s SessionInfo, in StepInput, out StepResult)
}
