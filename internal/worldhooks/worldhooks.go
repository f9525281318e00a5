// Package worldhooks plugs controllable perturbations and fictional-world
// ledgers into every simulator step (as sim.StepHooks), whatever API the
// step arrives through: the session API, OpenEnv or the MCP facade.
package worldhooks

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/mcpclient"
	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

// ParamPerturbations is the session parameter (CreateRequest.Params) that
// overrides a world's perturbation rules for one session: a perturbations
// section, merged by rule name into the spec's (see perturb.Merge).
const ParamPerturbations = "perturbations"

// ExtraFault is the StepInfo.Extra key carrying a direct fault (a
// perturb.Fault as JSON), so transports can render it natively.
const ExtraFault = "perturb_fault"

// BackendPerturb names what answered a step that a direct fault ended.
const BackendPerturb = "perturb"

// BackendToolCheck names what answered a tool call its world's tool
// definitions refuse (mcpworld.ToolCalls): no environment saw it.
const BackendToolCheck = "tool_check"

// Perturbations applies each world's perturbation rules: instructed rules
// add control text to the step's last user message, direct faults answer
// the step without calling the environment (rendered by
// mcpclient.RenderFault, so a JSON-RPC fault reads exactly like a real MCP
// server's protocol error), latency delays it. Fired rules
// are recorded as step labels.
type Perturbations struct {
	log *slog.Logger
	// Sleep waits out injected latency; nil means a timer honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Limits are the operator's caps on injected latency, per step and per
	// session; the zero value means perturb's defaults. Set before use.
	Limits perturb.Limits

	mu sync.Mutex
	// engines are the compiled rules of sessions' specs and overrides,
	// least recently used first in lru and bounded by maxEngineBytes; an
	// entry does not keep its spec alive and goes when the spec does (an
	// inline spec's when its session ends).
	engines     map[engineKey]*cachedEngine
	lru         list.List
	engineBytes int
	// bySpec indexes engines by spec; a spec in it has a cleanup that
	// drops its engines once it is collected.
	bySpec map[weak.Pointer[world.Spec]]map[engineKey]struct{}
	// slept is the latency injected so far per session id, for the
	// session cap. It lives in memory: a restarted server grants a
	// resumed session a fresh budget.
	slept map[string]time.Duration
}

// LabelLatencyCapped is the step label set when a cap shortened the
// latency the rules asked for: "step" or "session".
const LabelLatencyCapped = "perturb.latency_capped"

// engineKey names a session's effective rules without recomputing them: the
// world spec (its rules and tool names), weakly, and a digest of the raw
// per-session override. Sessions of one world share the spec pointer, so a
// step costs a map lookup.
type engineKey struct {
	spec     weak.Pointer[world.Spec]
	override [sha256.Size]byte // zero without an override
}

type cachedEngine struct {
	key  engineKey
	e    *perturb.Engine
	elem *list.Element
}

// Bounds of the engine cache: what the compiled patterns hold (each
// engine's at most perturb.MaxPatternBytes), and the count.
const (
	maxEngineBytes = 64 << 20
	maxEngines     = 4096
)

// NewPerturbations makes the hook; log may be nil.
func NewPerturbations(log *slog.Logger) *Perturbations {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Perturbations{log: log, engines: map[engineKey]*cachedEngine{}, bySpec: map[weak.Pointer[world.Spec]]map[engineKey]struct{}{},
		slept: map[string]time.Duration{}}
}

var _ sim.StepHook = (*Perturbations)(nil)

// engine compiles (once per world spec and override) the session's
// effective rules; nil when the session has none.
func (p *Perturbations) engine(s sim.SessionInfo) (*perturb.Engine, error) {
	raw := s.Params[ParamPerturbations]
	if string(raw) == "null" {
		raw = nil
	}
	if s.Spec.Perturbations == nil && len(raw) == 0 {
		return nil, nil
	}
	key := engineKey{spec: weak.Make(s.Spec)}
	if len(raw) > 0 {
		key.override = sha256.Sum256(raw)
	}
	p.mu.Lock()
	if c, ok := p.engines[key]; ok {
		p.lru.MoveToBack(c.elem)
		p.mu.Unlock()
		return c.e, nil
	}
	p.mu.Unlock()
	var override *perturb.Config
	if len(raw) > 0 {
		override = &perturb.Config{}
		if err := json.Unmarshal(raw, override); err != nil {
			return nil, fielderr.Under(sim.ErrBadRequest, "params.perturbations", err)
		}
	}
	tools := s.Spec.ToolNames()
	e, err := perturb.New(perturb.Merge(s.Spec.Perturbations, override, nil), tools)
	if err != nil {
		return nil, fielderr.Under(sim.ErrBadRequest, "params.perturbations", err)
	}
	p.keep(s.Spec, key, e)
	return e, nil
}

// keep caches e under key, making room within the bounds.
func (p *Perturbations) keep(spec *world.Spec, key engineKey, e *perturb.Engine) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.engines[key]; ok {
		return // compiled concurrently
	}
	for p.lru.Len() > 0 && (p.lru.Len() >= maxEngines || p.engineBytes+e.Bytes() > maxEngineBytes) {
		p.dropLocked(p.lru.Front().Value.(*cachedEngine))
	}
	c := &cachedEngine{key: key, e: e}
	c.elem = p.lru.PushBack(c)
	p.engines[key] = c
	p.engineBytes += e.Bytes()
	keys, ok := p.bySpec[key.spec]
	if !ok {
		keys = map[engineKey]struct{}{}
		p.bySpec[key.spec] = keys
		runtime.AddCleanup(spec, p.forgetSpec, key.spec)
	}
	keys[key] = struct{}{}
}

func (p *Perturbations) dropLocked(c *cachedEngine) {
	p.lru.Remove(c.elem)
	delete(p.engines, c.key)
	delete(p.bySpec[c.key.spec], c.key)
	p.engineBytes -= c.e.Bytes()
}

// forgetSpec drops the engines of a spec that was collected.
func (p *Perturbations) forgetSpec(spec weak.Pointer[world.Spec]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.bySpec[spec] {
		p.dropLocked(p.engines[k])
	}
	delete(p.bySpec, spec)
}

// cached reports the engines held and the bytes their patterns hold.
func (p *Perturbations) cached() (engines, bytes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.engines), p.engineBytes
}

// Stream is the key of a session's perturbation draws. A seeded session
// draws from its seed alone, so a run repeated with the same seeds sees the
// same perturbations (even after a restart), and a fork keeping its parent's
// seed repeats the parent's draws while a branch given a new seed draws
// anew. An unseeded session draws from its root session id: its forks share
// its draws, other sessions differ.
func Stream(s sim.SessionInfo) string {
	if s.Seed != nil {
		return "seed:" + strconv.FormatInt(*s.Seed, 10)
	}
	root := s.Root
	if root == "" {
		root = s.ID
	}
	return "root:" + root
}

// BeforeStep implements sim.StepHook.
func (p *Perturbations) BeforeStep(ctx context.Context, s sim.SessionInfo, in *sim.StepInput) (*sim.Observation, error) {
	e, err := p.engine(s)
	if err != nil || e.Empty() {
		return nil, err
	}
	tool := ""
	if in.Action.Tool != nil {
		tool = in.Action.Tool.Name
	}
	d := e.Decide(perturb.Step{Stream: Stream(s), Turn: in.Turn, Tool: tool, Action: in.Action.Text})
	if len(d.Fired) == 0 {
		return nil, nil
	}
	if in.Labels == nil {
		in.Labels = map[string]string{}
	}
	for k, v := range d.Labels() {
		in.Labels[k] = v
	}
	if d.Instruction != "" {
		if in.Control != "" {
			in.Control += "\n"
		}
		in.Control += d.Instruction
	}
	if d.Delay > 0 {
		delay, capped := p.budget(e, s.ID, d.Delay)
		if capped != "" {
			in.Labels[LabelLatencyCapped] = capped
		}
		if delay > 0 {
			if err := p.sleep(ctx, delay); err != nil {
				return nil, err
			}
		}
	}
	if d.Fault == nil {
		return nil, nil
	}
	fb, _ := json.Marshal(d.Fault)
	p.log.Debug("direct fault", "session", s.ID, "turn", in.Turn, "rule", d.Fault.Rule, "kind", d.Fault.Kind)
	return &sim.Observation{
		Text: mcpclient.RenderFault(d.Fault),
		Info: sim.StepInfo{Backend: BackendPerturb, Labels: in.Labels, Extra: map[string]json.RawMessage{ExtraFault: fb}},
	}, nil
}

// budget holds a step's delay to the step cap and to what is left of the
// session's, charges it, and says which cap cut it ("" when none did).
func (p *Perturbations) budget(e *perturb.Engine, session string, want time.Duration) (time.Duration, string) {
	stepCap, sessionCap := e.Caps(p.Limits)
	d, capped := want, ""
	if d > stepCap {
		d, capped = stepCap, "step"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if left := sessionCap - p.slept[session]; d > left {
		d, capped = max(left, 0), "session"
	}
	if d > 0 {
		if len(p.slept) >= 1<<16 { // bound the memory; forgetting only grants fresh budgets
			clear(p.slept)
		}
		p.slept[session] += d
	}
	return d, capped
}

func (p *Perturbations) sleep(ctx context.Context, d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AfterStep implements sim.StepHook.
func (p *Perturbations) AfterStep(context.Context, sim.SessionInfo, sim.StepInput, sim.StepResult) {}

// Ledger gives fictional worlds (specs with a facts section) a shared
// memory: before a step it adds the facts other sessions of the world
// established as world-state text; after a clean, unperturbed step it
// records the facts the observation asserted.
type Ledger struct {
	l   *fiction.Ledger
	log *slog.Logger
}

// NewLedger makes the hook over a ledger; log may be nil.
func NewLedger(l *fiction.Ledger, log *slog.Logger) *Ledger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Ledger{l: l, log: log}
}

var _ sim.StepHook = (*Ledger)(nil)

// InlineLedgerPrefix starts the ledger name of every inline spec.
const InlineLedgerPrefix = "inline/"

// LedgerWorld is the name a session's facts are kept under: its world's
// name for a world the server loaded; for a spec the client sent inline,
// InlineLedgerPrefix and the spec's content digest (sim.SessionInfo.Inline,
// first 32 hex digits), whatever name the spec gives itself. So an inline
// spec never reads or writes a loaded world's ledger, and inline specs
// share one only when they are the same spec.
func LedgerWorld(s sim.SessionInfo) string {
	if s.Inline == "" {
		return s.Spec.Name
	}
	return InlineLedgerPrefix + s.Inline[:min(len(s.Inline), 32)]
}

// BeforeStep implements sim.StepHook.
func (h *Ledger) BeforeStep(ctx context.Context, s sim.SessionInfo, in *sim.StepInput) (*sim.Observation, error) {
	if s.Spec.Facts == nil {
		return nil, nil
	}
	text, err := h.l.StateText(ctx, LedgerWorld(s), s.ID)
	if err != nil {
		h.log.Warn("world ledger unavailable; step runs without it", "world", LedgerWorld(s), "err", err)
		return nil, nil
	}
	if text != "" {
		if in.WorldState != "" {
			in.WorldState += "\n\n"
		}
		in.WorldState += text
	}
	return nil, nil
}

// AfterStep implements sim.StepHook. Perturbed steps, faults, replayed
// approximations and error observations teach the ledger nothing: their
// content is deliberately or possibly wrong.
func (h *Ledger) AfterStep(ctx context.Context, s sim.SessionInfo, in sim.StepInput, out sim.StepResult) {
	if s.Spec.Facts == nil || out.Info.Error != "" || out.Info.Approximate || out.Info.Labels[perturb.LabelRules] != "" {
		return
	}
	switch out.Info.Backend {
	case BackendPerturb, BackendToolCheck, "rule", "hook":
		return
	}
	if strings.TrimSpace(out.Observation) == "" {
		return
	}
	world := LedgerWorld(s)
	rec, err := h.l.Observe(context.WithoutCancel(ctx), world, s.ID, in.Turn, out.Observation)
	if err != nil {
		h.log.Warn("world ledger: record facts", "world", world, "session", s.ID, "turn", in.Turn, "err", err)
		return
	}
	if len(rec) > 0 {
		h.log.Debug("world ledger: new facts", "world", world, "session", s.ID, "turn", in.Turn, "facts", len(rec))
	}
}
