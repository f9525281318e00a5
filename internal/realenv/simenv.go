package realenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
)

// Backend names under which real environments serve sessions.
const (
	BackendTerminal = "real:terminal"
	BackendMCP      = "real:mcp"
)

// MCPServer is an MCP server an operator allows sessions to launch; a
// session picks one by name, never by command line.
type MCPServer struct {
	Command []string `json:"command"`
	Env     []string `json:"env,omitempty"`
	Dir     string   `json:"dir,omitempty"`
}

// BackendOptions configure the real backends of a session manager.
// Sessions can only start what the operator configured here: a client
// names a task or a server, it never passes host paths or commands.
type BackendOptions struct {
	// Tasks are the terminal tasks sessions may run, by name; a session
	// picks one with params.real.task or by naming a world after it. nil
	// allows only plain terminals (empty work dir, optional setup script
	// run inside the sandbox).
	Tasks map[string]*Task
	// MCPServers are the MCP servers sessions may launch, by name
	// (params.real.server, or the world's name); nil allows none.
	MCPServers map[string]MCPServer
	// Terminal are the base terminal options; nil means defaults.
	Terminal *TerminalOptions
	// MCPCallTimeout bounds one tool call; 0 means 60 seconds.
	MCPCallTimeout time.Duration
	// Simulator is the world-model backend that shadowed sessions compare
	// against; nil disables shadow mode.
	Simulator sim.BackendFactory
	// SimulatorName is the backend name Simulator is registered under,
	// which Backends replaces with its shadow-aware wrapper; "" means
	// sim.BackendModel.
	SimulatorName string
	// Logger receives lifecycle logs; nil discards them.
	Logger *slog.Logger
}

// RealParams is a session's params.real.
type RealParams struct {
	// Task names a configured terminal task.
	Task string `json:"task,omitempty"`
	// Server names a configured MCP server.
	Server string `json:"server,omitempty"`
	// Setup is a bash script run inside the sandbox before the first
	// screen; plain terminals only: a session of a task that sets it is
	// refused.
	Setup string `json:"setup,omitempty"`
}

// Shadow values of params.shadow.
const (
	// ShadowReal on a simulator session steps the real environment beside
	// the simulator and returns the real observation.
	ShadowReal = "real"
	// ShadowModel on a real session does the same from the other side.
	ShadowModel = "model"
)

// Backends returns the real backends to register with a sim.Manager:
// real:terminal and real:mcp, and, when o.Simulator is set, a replacement
// for the simulator backend (o.SimulatorName) that honours shadow: real.
func Backends(o *BackendOptions) map[string]sim.BackendFactory {
	b := &backends{}
	if o != nil {
		b.o = *o
	}
	if b.o.Logger == nil {
		b.o.Logger = slog.New(slog.DiscardHandler)
	}
	out := map[string]sim.BackendFactory{
		BackendTerminal: b.factory(BackendTerminal),
		BackendMCP:      b.factory(BackendMCP),
	}
	if b.o.Simulator != nil {
		name := b.o.SimulatorName
		if name == "" {
			name = sim.BackendModel
		}
		out[name] = b.shadowable(b.o.Simulator)
	}
	return out
}

type backends struct{ o BackendOptions }

func params(s sim.SessionInfo) (RealParams, string, error) {
	var p RealParams
	if raw, ok := s.Params["real"]; ok && len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &p); err != nil {
			return p, "", fielderr.Under(sim.ErrBadRequest, "params.real", err)
		}
	}
	var shadow string
	if raw, ok := s.Params["shadow"]; ok && len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &shadow); err != nil {
			return p, "", fielderr.New(sim.ErrBadRequest, "params.shadow", "want a string")
		}
	}
	return p, shadow, nil
}

// factory builds real sessions of one backend; with shadow: model (and a
// simulator configured) the session is shadowed.
func (b *backends) factory(name string) sim.BackendFactory {
	return func(ctx context.Context, s sim.SessionInfo) (sim.Environment, error) {
		_, shadow, err := params(s)
		if err != nil {
			return nil, err
		}
		real, err := b.realEnv(name, s)
		if err != nil {
			return nil, err
		}
		switch shadow {
		case "":
			return real, nil
		case ShadowModel, "sim", "simulator":
			if b.o.Simulator == nil {
				return nil, fielderr.New(sim.ErrBadRequest, "shadow", "no world model is configured to shadow with")
			}
			model, err := b.o.Simulator(ctx, s)
			if err != nil {
				return nil, err
			}
			return newShadow(s.Spec.Domain, real, model), nil
		}
		return nil, fielderr.New(sim.ErrBadRequest, "shadow", "%s sessions can be shadowed by %q, not %q", name, ShadowModel, shadow)
	}
}

// shadowable wraps the simulator backend: shadow: real adds the real
// environment of the world's domain.
func (b *backends) shadowable(simulator sim.BackendFactory) sim.BackendFactory {
	return func(ctx context.Context, s sim.SessionInfo) (sim.Environment, error) {
		p, shadow, err := params(s)
		if err != nil {
			return nil, err
		}
		if shadow == "" {
			if err := realParamsUnused(p, s.Spec.Domain); err != nil {
				return nil, err
			}
			return simulator(ctx, s)
		}
		if shadow != ShadowReal {
			return nil, fielderr.New(sim.ErrBadRequest, "shadow", "unknown shadow %q (want %q)", shadow, ShadowReal)
		}
		var name string
		switch s.Spec.Domain {
		case domain.Terminal:
			name = BackendTerminal
		case domain.MCP:
			name = BackendMCP
		default:
			return nil, fielderr.New(sim.ErrBadRequest, "shadow", "no real environment for domain %s", s.Spec.Domain)
		}
		real, err := b.realEnv(name, s)
		if err != nil {
			return nil, err
		}
		model, err := simulator(ctx, s)
		if err != nil {
			return nil, err
		}
		return newShadow(s.Spec.Domain, real, model), nil
	}
}

// realParamsUnused refuses params.real on a session no real environment
// serves (the simulator, not shadowed), which would otherwise be ignored
// without a word: the client meant a real server or task.
func realParamsUnused(p RealParams, d domain.Domain) error {
	field := ""
	switch {
	case p.Server != "":
		field = "params.real.server"
	case p.Task != "":
		field = "params.real.task"
	case p.Setup != "":
		field = "params.real.setup"
	default:
		return nil
	}
	backend := realBackendOf(d)
	if backend == "" {
		return fielderr.New(sim.ErrBadRequest, field, "%s worlds have no real environment, so %s is not used", d, field)
	}
	return fielderr.New(sim.ErrBadRequest, field, "is used only by a real environment: create the session with \"backend\": %q (or \"shadow\": %q)", backend, ShadowReal)
}

// realEnv prepares (does not start) the real environment of a session. A
// session that already has history (a fork, or a restart) cannot be
// rebuilt: the real state is gone.
func (b *backends) realEnv(name string, s sim.SessionInfo) (*simAdapter, error) {
	if len(s.History) > 0 {
		return nil, fmt.Errorf("%w: %s sessions hold real state that their history cannot rebuild", sim.ErrNotResumable, name)
	}
	p, _, err := params(s)
	if err != nil {
		return nil, err
	}
	switch name {
	case BackendTerminal:
		if s.Spec.Domain != domain.Terminal {
			return nil, fielderr.New(sim.ErrBadRequest, "backend", "%s serves terminal worlds, not %s", name, s.Spec.Domain)
		}
		var opts TerminalOptions
		if b.o.Terminal != nil {
			opts = *b.o.Terminal
		}
		opts.Logger = b.o.Logger
		opts.TaskDescription = s.Spec.TaskDescription
		taskName := p.Task
		if taskName == "" {
			if _, ok := b.o.Tasks[s.Spec.Name]; ok {
				taskName = s.Spec.Name
			}
		}
		var task *Task
		if taskName != "" {
			t, ok := b.o.Tasks[taskName]
			if !ok {
				return nil, fielderr.New(sim.ErrBadRequest, "params.real.task", "no task %q is configured", taskName)
			}
			opts = *t.TerminalOptions(&opts)
			task = t
		}
		if p.Setup != "" {
			// A task's start is the task author's: a client's script run
			// beside it could leave anything behind for the check.
			if task != nil {
				return nil, fielderr.New(sim.ErrBadRequest, "params.real.setup", "applies to plain terminals only, not to task %q", task.Name)
			}
			opts.Setup = p.Setup
		}
		term := NewTerminal(&opts)
		return &simAdapter{env: term, backend: name, term: term, task: task}, nil
	case BackendMCP:
		if s.Spec.Domain != domain.MCP {
			return nil, fielderr.New(sim.ErrBadRequest, "backend", "%s serves MCP worlds, not %s", name, s.Spec.Domain)
		}
		server := p.Server
		if server == "" {
			server = s.Spec.Name
		}
		cfg, ok := b.o.MCPServers[server]
		if !ok {
			return nil, fielderr.New(sim.ErrBadRequest, "params.real.server", "no MCP server %q is configured", server)
		}
		env, err := NewMCP(&MCPOptions{Command: cfg.Command, Env: cfg.Env, Dir: cfg.Dir, TaskDescription: s.Spec.TaskDescription, CallTimeout: b.o.MCPCallTimeout, Logger: b.o.Logger})
		if err != nil {
			return nil, err
		}
		return &simAdapter{env: env, backend: name}, nil
	}
	return nil, fielderr.New(sim.ErrBadRequest, "backend", "unknown real backend %s", name)
}

// simAdapter serves a real Env as a session environment. A terminal
// serving a task (term and task set) runs the task's check when the episode
// ends, and the check's outcome is the step's reward: 1 solved, 0 not.
type simAdapter struct {
	env     Env
	backend string
	term    *Terminal
	task    *Task
}

// taskCheckTimeout bounds the check run at the end of a served task.
const taskCheckTimeout = 2 * time.Minute

func (a *simAdapter) Reset(ctx context.Context) (sim.Observation, error) {
	first, err := a.env.Start(ctx)
	if err != nil {
		return sim.Observation{}, fmt.Errorf("%s: %w", a.backend, err)
	}
	return sim.Observation{Text: first, Info: sim.StepInfo{Backend: a.backend}}, nil
}

// Step performs the action for real. A broken environment answers with
// its error observation, ends the episode and says so in info.error and
// info.extra.broken; the session's record keeps every turn.
func (a *simAdapter) Step(ctx context.Context, in sim.StepInput) (sim.Observation, error) {
	res, err := a.env.Step(ctx, in.Action.Text)
	if err != nil {
		if errors.Is(err, conversation.ErrBadAction) {
			return sim.Observation{}, sim.BadAction(err)
		}
		return sim.Observation{}, fmt.Errorf("%s: %w", a.backend, err)
	}
	obs := sim.Observation{Text: res.Observation, Terminated: res.Terminated, Info: sim.StepInfo{Backend: a.backend, LatencyMS: res.Latency.Milliseconds(), Error: res.Error}}
	if res.Broken {
		obs.Terminated, obs.Broken = true, true
		obs.Info.EndReason = "the real environment broke: " + res.Error
		obs.Info.Extra = map[string]json.RawMessage{"broken": json.RawMessage("true")}
	} else if res.Terminated {
		obs.Info.EndReason = "the real environment ended the episode"
		if a.task != nil {
			if err := a.scoreTask(ctx, &obs); err != nil {
				obs.Info.Error = strings.TrimPrefix(obs.Info.Error+"; "+err.Error(), "; ")
			}
		}
	}
	return obs, nil
}

// EndEpisode implements sim.EpisodeEnder: a served task's check runs in
// the ended episode's sandbox and its outcome is the reward.
func (a *simAdapter) EndEpisode(ctx context.Context, obs *sim.Observation) error {
	if a.task == nil {
		return nil
	}
	return a.scoreTask(ctx, obs)
}

// scoreTask runs the task's check and makes its outcome the reward (1
// solved, 0 not), with the check's exit code and output in
// info.extra.task_check.
func (a *simAdapter) scoreTask(ctx context.Context, obs *sim.Observation) error {
	check, err := runCheck(ctx, a.term, a.task, taskCheckTimeout)
	if err != nil {
		return err
	}
	obs.Reward = 0
	if check.Passed {
		obs.Reward = 1
	}
	obs.Info.RewardComponents = map[string]float64{"task_check": obs.Reward}
	raw, err := json.Marshal(check)
	if err != nil {
		return err
	}
	if obs.Info.Extra == nil {
		obs.Info.Extra = map[string]json.RawMessage{}
	}
	obs.Info.Extra["task_check"] = raw
	return nil
}

func (a *simAdapter) Close() error { return a.env.Close() }

// Shadow is what a shadowed step records in info.extra.shadow: the
// simulator's observation for the same action and history, and its
// divergence from the real one.
type Shadow struct {
	Backend          string     `json:"backend"`
	Observation      string     `json:"observation"`
	Divergence       Divergence `json:"divergence"`
	LatencyMS        int64      `json:"latency_ms"`
	PromptTokens     int        `json:"prompt_tokens,omitempty"`
	CompletionTokens int        `json:"completion_tokens,omitempty"`
}

// shadowEnv steps a real environment and a simulator with the same action
// and history; the agent gets the real observation, the record gets both
// and their divergence. The simulator always sees the real history
// (teacher forcing), so each step's divergence is that step's alone.
type shadowEnv struct {
	d     domain.Domain
	real  *simAdapter
	model sim.Environment
}

func newShadow(d domain.Domain, real *simAdapter, model sim.Environment) *shadowEnv {
	return &shadowEnv{d: d, real: real, model: model}
}

func (e *shadowEnv) Reset(ctx context.Context) (sim.Observation, error) {
	obs, err := e.real.Reset(ctx)
	if err != nil {
		return obs, err
	}
	if _, err := e.model.Reset(ctx); err != nil {
		_ = e.real.Close()
		return sim.Observation{}, fmt.Errorf("shadow simulator: %w", err)
	}
	obs.Info.Backend = e.real.backend + "+shadow"
	return obs, nil
}

func (e *shadowEnv) Step(ctx context.Context, in sim.StepInput) (sim.Observation, error) {
	var realObs, simObs sim.Observation
	var simErr error
	var simLatency time.Duration
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		var err error
		realObs, err = e.real.Step(gctx, in)
		return err
	})
	g.Go(func() error {
		begin := time.Now()
		simObs, simErr = e.model.Step(gctx, in)
		simLatency = time.Since(begin)
		return nil
	})
	if err := g.Wait(); err != nil {
		return sim.Observation{}, err
	}
	hist := make([]trajectory.Turn, len(in.History))
	for i, h := range in.History {
		hist[i] = trajectory.Turn{Action: h.Action, Observation: h.Observation}
	}
	sh := Shadow{
		Backend:          simObs.Info.Backend,
		Observation:      simObs.Text,
		Divergence:       CompareTurn(e.d, hist, in.Action.Text, realObs.Text, simObs.Text),
		LatencyMS:        simLatency.Milliseconds(),
		PromptTokens:     simObs.Info.PromptTokens,
		CompletionTokens: simObs.Info.CompletionTokens,
	}
	sh.Divergence.Turn = in.Turn
	if simErr != nil {
		sh.Divergence.Error = simErr.Error()
	} else if simObs.Info.Error != "" {
		sh.Divergence.Error = simObs.Info.Error
	}
	obs := realObs
	// The message the simulator was sent is the one recorded, so its later
	// requests extend this one byte for byte.
	obs.Message = simObs.Message
	if obs.Info.Extra == nil {
		obs.Info.Extra = map[string]json.RawMessage{}
	}
	b, err := trajectory.Marshal(sh)
	if err != nil {
		return sim.Observation{}, err
	}
	obs.Info.Extra["shadow"] = b
	obs.Info.Model = simObs.Info.Model
	return obs, nil
}

func (e *shadowEnv) Close() error {
	return errors.Join(e.real.Close(), e.model.Close())
}

// TaskWorld is the world spec of a terminal task for the session API: the
// instruction as task description, the terminal action space, and the
// seed's files as initial state. Its backend is real:terminal.
func TaskWorld(t *Task) *world.Spec {
	state := "The shell shows the prompt `root@sandbox:/app# ` in the work dir /app (also HOME)."
	if seed := t.SeedDir(); seed != "" {
		if files := listFiles(seed, 200); files != "" {
			state += "\n\nFiles under /app:\n" + files
		}
	}
	if strings.TrimSpace(t.Setup) != "" {
		state += "\n\nBefore the first screen this setup script ran in /app:\n" + t.Setup
	}
	return &world.Spec{
		Name:            t.Name,
		Domain:          domain.Terminal,
		Description:     "terminal task " + t.Name,
		TaskDescription: t.Instruction,
		ActionSpace:     world.ActionSpace{Description: TerminalActionSpace},
		InitialState:    state,
		Backend:         BackendTerminal,
	}
}

// SimPredictor predicts observations with a session backend (the world
// model) for teacher-forced verification: every prediction gets a fresh
// environment whose history is the real turns before it.
type SimPredictor struct {
	Factory sim.BackendFactory
	Spec    *world.Spec
	// Model overrides the world model's name; "" keeps the backend's.
	Model  string
	system string
}

// ErrEndAction marks a turn whose action ends the episode by the domain's
// rule; the simulator is not asked for it.
var ErrEndAction = errors.New("episode-ending action: not simulated")

// NewSimPredictor validates the spec and renders its system prompt.
func NewSimPredictor(f sim.BackendFactory, spec *world.Spec) (*SimPredictor, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	sys, err := sim.SystemPrompt(spec)
	if err != nil {
		return nil, err
	}
	return &SimPredictor{Factory: f, Spec: spec, system: sys}, nil
}

// NewSimPredictorPrompt is [NewSimPredictor] with the system prompt given
// instead of rendered from spec by the built-in templates: research scores
// a template version by its rendering of a recording's own components.
func NewSimPredictorPrompt(f sim.BackendFactory, spec *world.Spec, system string) (*SimPredictor, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &SimPredictor{Factory: f, Spec: spec, system: system}, nil
}

// Predict implements Predictor.
func (p *SimPredictor) Predict(ctx context.Context, turn int, action string, history []trajectory.Turn) (string, error) {
	raw, _ := json.Marshal(action)
	act, err := conversation.ParseAction(p.Spec.Domain, raw)
	if err != nil {
		return "", fmt.Errorf("turn %d action: %w", turn, err)
	}
	if act.End {
		return "", ErrEndAction
	}
	hist := make([]sim.HistoryTurn, len(history))
	for i, h := range history {
		text := h.Action
		if a, err := conversation.ParseAction(p.Spec.Domain, mustMarshal(h.Action)); err == nil {
			text = a.Text
		}
		hist[i] = sim.HistoryTurn{Action: text, Observation: h.Observation, Message: conversation.UserMessage(i+1, text, "", ""), Assistant: conversation.ObservationResponse(h.Observation)}
	}
	env, err := p.Factory(ctx, sim.SessionInfo{ID: fmt.Sprintf("verify-%d", turn), Spec: p.Spec, SystemPrompt: p.system, Backend: sim.BackendModel, Model: p.Model, History: hist})
	if err != nil {
		return "", err
	}
	defer env.Close()
	obs, err := env.Step(ctx, sim.StepInput{Turn: turn, Action: act, History: hist})
	if err != nil {
		return "", err
	}
	if obs.Info.Error != "" {
		return obs.Text, errors.New(obs.Info.Error)
	}
	return obs.Text, nil
}

func mustMarshal(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
