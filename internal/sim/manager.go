package sim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
)

// Options configures a Manager. The zero value of each field is a usable
// default.
type Options struct {
	// Store persists sessions; nil keeps them in memory only.
	Store Store
	// Worlds are the specs sessions can name by world_id.
	Worlds map[string]*world.Spec
	// Backends maps backend names to factories; more can be added with
	// RegisterBackend.
	Backends map[string]BackendFactory
	// SystemPrompt renders a new session's world-model system prompt from
	// its domain and components (a template version's renderer); nil means
	// trajectory.WorldSystemPrompt, the built-in templates.
	SystemPrompt trajectory.SystemPromptFunc
	// DefaultBackend is used when neither the request nor the spec names
	// one; "" means BackendModel.
	DefaultBackend string
	// MaxSessions bounds the sessions held open at once; 0 means 10000.
	// Ended sessions do not count; idle ones are reclaimed after IdleTTL.
	MaxSessions int
	// IdleTTL expires a session nobody touched for this long; 0 means 30
	// minutes, negative never.
	IdleTTL time.Duration
	// MaxTurns truncates an episode after this many steps when its spec
	// sets no limit; 0 means 200.
	MaxTurns int
	// MaxActionBytes bounds one action; 0 means 1 MiB.
	MaxActionBytes int
	// MaxInlineSpecBytes bounds the JSON of a world spec a client sends
	// inline; 0 means DefaultMaxInlineSpecBytes, negative no limit.
	MaxInlineSpecBytes int
	// MaxInlineTools bounds the tools of an inline spec's action space; 0
	// means DefaultMaxInlineTools, negative no limit.
	MaxInlineTools int
	// MaxSessionBytes bounds what a session holds in memory: its spec, its
	// system prompt and every turn's action, observation and the messages
	// standing for them. The step that reaches it ends the episode as
	// truncated (like the turn limit), and a spec that alone reaches it is
	// refused. 0 means DefaultMaxSessionBytes, negative no limit.
	MaxSessionBytes int
	// Models are the model names a client may choose for its session
	// (CreateRequest.Model): the served model and any others its servers
	// answer to. A request naming another is refused on field "model";
	// empty means a client may name none, and sessions use the backend's
	// model.
	Models []string
	// ExtraBodyKeys are the sampling.extra_body keys an inline spec (a
	// client's) may set: they go into every world-model request sent with
	// the operator's credentials. Empty, the default, refuses extra_body
	// in inline specs; world.ReservedExtraKeys are refused in every spec
	// whatever this says. Specs the server loaded are the operator's and
	// not limited by it.
	ExtraBodyKeys []string
	// SuccessJudge decides the episode success of worlds whose reward
	// declares a judged criterion (reward.success.judge); nil means none,
	// and an inline spec declaring one is refused.
	SuccessJudge *judge.SuccessJudge
	// Hooks run around every step, in order.
	Hooks []StepHook
	// Observer receives every step's outcome (metrics); nil means none.
	Observer Observer
	// Logger receives session lifecycle logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Observer is told about every step, for metrics.
type Observer interface {
	ObserveStep(StepEvent)
}

// StepEvent is one step's outcome.
type StepEvent struct {
	// Session is the stepped session's id.
	Session  string
	Domain   string
	Backend  string
	Duration time.Duration
	// Result is nil when the step failed with Err.
	Result *StepResult
	Err    error
}

// Manager holds the sessions of a server.
type Manager struct {
	opts  Options
	store Store
	log   *slog.Logger

	mu     sync.Mutex
	worlds map[string]*world.Spec
	// prepared holds what every session of a loaded world starts from,
	// made by its first session (see prepare).
	prepared map[*world.Spec]preparedWorld
	backends map[string]BackendFactory
	sessions map[string]*session
	claimed  map[string]bool // ids named by creates in progress
	reserved int
	closing  bool
	inflight sync.WaitGroup

	// reaping ends when Close calls stopReaper, and with it an expiry
	// under way (see reap).
	reaping    context.Context
	stopReaper context.CancelFunc
	reaperDone chan struct{}
}

type session struct {
	// sem serializes the steps, forks and deletes of the session.
	sem chan struct{}

	mu   sync.Mutex // guards the fields below
	rec  SessionRecord
	spec *world.Spec
	// The recorded turns, which only ever grow: turn i+1 is hist[i] and
	// *result(i), turnBytes their size. hist is handed to environments as
	// it is (StepInput.History, capped at its length; an element is never
	// written once added), so a step copies no history. The results are
	// kept in chunks of resultChunk, so that recording a turn copies no
	// earlier one and leaves no grown-out array behind.
	hist      []HistoryTurn
	results   []*[resultChunk]StepResult
	turnBytes int
	// compiled is what an inline spec's schemas and regular expressions
	// can hold compiled (world.Spec.CompiledBytes, measured at create or
	// load, inherited by forks); 0 for a loaded world, whose compiled
	// state its sessions share.
	compiled int
	env      Environment
	lastUsed time.Time
	users    int
	resident bool // held in Manager.sessions
	// pending is a step computed but not recorded, kept for its retry
	// (pending.go); nil when none.
	pending *pendingTurn
}

// New makes a Manager and starts its idle-session reaper; Close stops it.
func New(opts *Options) *Manager {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Store == nil {
		o.Store = NewMemStore()
	}
	if o.DefaultBackend == "" {
		o.DefaultBackend = BackendModel
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = 10000
	}
	if o.IdleTTL == 0 {
		o.IdleTTL = 30 * time.Minute
	}
	if o.MaxTurns == 0 {
		o.MaxTurns = 200
	}
	if o.MaxActionBytes == 0 {
		o.MaxActionBytes = 1 << 20
	}
	if o.MaxInlineSpecBytes == 0 {
		o.MaxInlineSpecBytes = DefaultMaxInlineSpecBytes
	}
	if o.MaxInlineTools == 0 {
		o.MaxInlineTools = DefaultMaxInlineTools
	}
	if o.MaxSessionBytes == 0 {
		o.MaxSessionBytes = DefaultMaxSessionBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		opts: o, store: o.Store, log: log,
		worlds:   map[string]*world.Spec{},
		backends: map[string]BackendFactory{},
		sessions: map[string]*session{},
	}
	maps.Copy(m.worlds, o.Worlds)
	maps.Copy(m.backends, o.Backends)
	if o.IdleTTL > 0 {
		m.reaping, m.stopReaper = context.WithCancel(context.Background())
		m.reaperDone = make(chan struct{})
		go m.reap(min(o.IdleTTL/4, time.Minute))
	}
	return m
}

// RegisterBackend adds or replaces a backend by name (e.g. realenv's
// "real:terminal").
func (m *Manager) RegisterBackend(name string, f BackendFactory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.backends[name] = f
}

// AddWorld makes a spec available by its name.
func (m *Manager) AddWorld(s *world.Spec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.worlds[s.Name]; old != nil {
		delete(m.prepared, old)
	}
	m.worlds[s.Name] = s
}

// World returns a loaded spec by name.
func (m *Manager) World(name string) (*world.Spec, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.worlds[name]
	return s, ok
}

// SessionSpec returns the world spec a session runs, loaded or inline
// (OpenEnv's MCP clients list a session's tools from it).
func (m *Manager) SessionSpec(ctx context.Context, id string) (*world.Spec, error) {
	s, err := m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	defer m.release(s)
	return s.spec, nil
}

// Worlds lists the loaded specs by name.
func (m *Manager) Worlds() []*world.Spec {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*world.Spec, 0, len(m.worlds))
	for _, s := range m.worlds {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Len is the number of sessions held open.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// CreateRequest starts a session.
type CreateRequest struct {
	// World is an inline spec; WorldID names a loaded one. Exactly one is
	// needed.
	World   *world.Spec
	WorldID string
	Seed    *int64
	// Model overrides the world model's name.
	Model string
	// Backend overrides the spec's backend.
	Backend string
	Params  map[string]json.RawMessage
	Labels  map[string]string
	// ID, when not empty, is the new session's id instead of a random
	// s_… one (OpenEnv clients name their episode_id): 1 to 128 letters,
	// digits, '.', '_' or '-'. An id taken by an open session or by one in
	// the store is ErrSessionExists.
	ID string
	// Private makes a session no client can address, for a server's own
	// use (a reset group's root, which every member forks): Step, Fork,
	// Delete, State, Trajectory and SessionSpec answer ErrUnknownSession
	// for it, as for an id that does not exist; only ForkPrivate and
	// DeletePrivate reach it. It holds across restarts (it is stored).
	// Servers never set it from a client's request.
	Private bool
}

// Reply answers a create or a fork.
type Reply struct {
	SessionID   string    `json:"session_id"`
	Observation string    `json:"observation"`
	Info        ReplyInfo `json:"info"`
}

// ReplyInfo describes a new session.
type ReplyInfo struct {
	// Turn is the number of recorded turns (0 for a new session).
	Turn    int    `json:"turn"`
	World   string `json:"world"`
	Domain  string `json:"domain"`
	Backend string `json:"backend"`
	// Source says what produced the observation ("spec" for a world's
	// initial state).
	Source     string `json:"source,omitempty"`
	Parent     string `json:"parent,omitempty"`
	Terminated bool   `json:"terminated,omitempty"`
	Truncated  bool   `json:"truncated,omitempty"`
}

// validID reports whether a client-chosen session id is usable in a URL
// path and a log line as it is.
func validID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// claim reserves a client-chosen session id until release, so two creates
// naming it cannot both pass the check against open and stored sessions.
func (m *Manager) claim(ctx context.Context, id string) (release func(), err error) {
	if !validID(id) {
		return nil, badField("session_id", "%q is not a usable session id (1 to 128 letters, digits, '.', '_' or '-')", id)
	}
	m.mu.Lock()
	if m.sessions[id] != nil || m.claimed[id] {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w: %s is open", ErrSessionExists, id)
	}
	if m.claimed == nil {
		m.claimed = map[string]bool{}
	}
	m.claimed[id] = true
	m.mu.Unlock()
	release = func() {
		m.mu.Lock()
		delete(m.claimed, id)
		m.mu.Unlock()
	}
	switch _, _, err := m.store.LoadSession(ctx, id); {
	case err == nil:
		release()
		return nil, fmt.Errorf("%w: %s is in the store", ErrSessionExists, id)
	case !errors.Is(err, ErrNotFound):
		release()
		return nil, fmt.Errorf("check session id %s: %w", id, err)
	}
	return release, nil
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "s_" + hex.EncodeToString(b[:])
}

// Create starts a session and returns its first observation.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (*Reply, error) {
	if err := m.checkModel(req.Model); err != nil {
		return nil, err
	}
	spec, err := m.resolveWorld(req)
	if err != nil {
		return nil, err
	}
	backend := req.Backend
	if backend == "" {
		backend = spec.Backend
	}
	if backend == "" {
		backend = m.opts.DefaultBackend
	}
	factory, err := m.backend(backend)
	if err != nil {
		return nil, err
	}
	sys, specJSON, err := m.prepare(spec, req.World == nil)
	if err != nil {
		return nil, err
	}
	compiled := 0
	if req.World != nil {
		compiled = spec.CompiledBytes()
	}
	if lim := m.opts.MaxSessionBytes; lim > 0 && len(specJSON)+len(sys)+compiled >= lim {
		return nil, fielderr.New(ErrTooLarge, "world", "the spec, its system prompt and what its schemas and regular expressions compile into take %d bytes, over the session size limit of %d",
			len(specJSON)+len(sys)+compiled, lim).WithSetting("MaxSessionBytes")
	}
	if err := m.enter(); err != nil {
		return nil, err
	}
	defer m.inflight.Done()
	if err := m.reserve(); err != nil {
		return nil, err
	}
	id := newID()
	if req.ID != "" {
		release, err := m.claim(ctx, req.ID)
		if err != nil {
			m.unreserve()
			return nil, err
		}
		defer release()
		id = req.ID
	}
	now := m.opts.Now().UTC()
	rec := SessionRecord{
		ID: id, Root: id, World: spec.Name, Domain: string(spec.Domain), Backend: backend,
		Model: req.Model, Seed: req.Seed, Spec: specJSON, Inline: inlineDigest(req, specJSON), SystemPrompt: sys,
		Params: req.Params, Labels: req.Labels, Private: req.Private, Status: StatusActive, CreatedAt: now, UpdatedAt: now,
	}
	s := newSession(rec, spec, nil, now)
	s.compiled = compiled
	env, err := factory(ctx, s.envInfoLocked())
	if err != nil {
		m.unreserve()
		return nil, fmt.Errorf("start %s environment for world %s: %w", backend, spec.Name, err)
	}
	first, err := env.Reset(ctx)
	if err != nil {
		_ = env.Close()
		m.unreserve()
		return nil, fmt.Errorf("reset %s environment for world %s: %w", backend, spec.Name, err)
	}
	s.env = env
	s.rec.InitialObservation = first.Text
	if err := m.store.CreateSession(context.WithoutCancel(ctx), s.rec, nil); err != nil {
		_ = env.Close()
		m.unreserve()
		return nil, fmt.Errorf("store session %s: %w", id, err)
	}
	m.adopt(s)
	m.log.Info("session created", "session", id, "world", spec.Name, "backend", backend)
	src := first.Info.Backend
	if src == "" {
		src = backend
	}
	return &Reply{SessionID: id, Observation: first.Text, Info: ReplyInfo{
		World: spec.Name, Domain: string(spec.Domain), Backend: backend, Source: src, Terminated: first.Terminated,
	}}, nil
}

// preparedWorld is what a session of a world starts from: its system
// prompt and its spec as JSON.
type preparedWorld struct {
	sys  string
	spec json.RawMessage
}

// prepare renders spec's system prompt and encodes the spec. For a loaded
// world (loaded) both depend on nothing but the spec, so they are made by
// its first session and shared by the next ones, which then hold one copy
// between them; an inline spec's are made for its session.
func (m *Manager) prepare(spec *world.Spec, loaded bool) (string, json.RawMessage, error) {
	if loaded {
		m.mu.Lock()
		p, ok := m.prepared[spec]
		m.mu.Unlock()
		if ok {
			return p.sys, p.spec, nil
		}
	}
	render := m.opts.SystemPrompt
	if render == nil {
		render = trajectory.WorldSystemPrompt
	}
	sys, err := render(spec.Domain, Components(spec))
	if err != nil {
		return "", nil, fielderr.Wrap(ErrBadRequest, "world.domain", err)
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return "", nil, fmt.Errorf("encode world spec: %w", err)
	}
	if loaded {
		m.mu.Lock()
		if m.worlds[spec.Name] == spec { // not replaced meanwhile
			if m.prepared == nil {
				m.prepared = map[*world.Spec]preparedWorld{}
			}
			m.prepared[spec] = preparedWorld{sys: sys, spec: specJSON}
		}
		m.mu.Unlock()
	}
	return sys, specJSON, nil
}

func (m *Manager) resolveWorld(req CreateRequest) (*world.Spec, error) {
	switch {
	case req.World != nil && req.WorldID != "":
		return nil, badField("world", "give either world or world_id, not both")
	case req.World != nil:
		if req.World.Name == "" {
			req.World.Name = "inline"
		}
		if err := m.checkInlineTools(req.World); err != nil {
			return nil, err
		}
		if err := m.checkInlineSampling(req.World); err != nil {
			return nil, err
		}
		if err := req.World.Validate(); err != nil {
			return nil, fielderr.Under(ErrBadRequest, "world", err)
		}
		if req.World.Reward.Judged() && m.opts.SuccessJudge == nil {
			return nil, fielderr.New(ErrBadRequest, "world.reward.success.judge", "%v", errNoSuccessJudge).WithSetting("SuccessJudge")
		}
		return req.World, nil
	case req.WorldID != "":
		s, ok := m.World(req.WorldID)
		if !ok {
			return nil, fielderr.New(ErrUnknownWorld, "world_id", "no world named %q is loaded", req.WorldID)
		}
		return s, nil
	}
	return nil, badField("world", "missing: give world (an inline spec) or world_id")
}

func (m *Manager) backend(name string) (BackendFactory, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.backends[name]
	if !ok {
		names := make([]string, 0, len(m.backends))
		for n := range m.backends {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fielderr.New(ErrUnknownBackend, "backend", "no backend %q (have %v)", name, names)
	}
	return f, nil
}

// enter registers an in-flight call unless the manager is draining.
func (m *Manager) enter() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.enterLocked()
}

// enterLocked is enter with m.mu held.
func (m *Manager) enterLocked() error {
	if m.closing {
		return ErrShuttingDown
	}
	m.inflight.Add(1)
	return nil
}

// reserve takes a session slot; it becomes the session's in adopt, or is
// given back with unreserve.
func (m *Manager) reserve() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sessions)+m.reserved >= m.opts.MaxSessions {
		return fmt.Errorf("%w: %d sessions open", ErrCapacity, len(m.sessions)+m.reserved)
	}
	m.reserved++
	return nil
}

func (m *Manager) unreserve() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reserved--
}

// adopt turns a reserved slot into a resident session.
func (m *Manager) adopt(s *session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reserved--
	s.resident = true
	m.sessions[s.rec.ID] = s
}

func (s *session) infoLocked() SessionInfo {
	// Capped at its length: an append by a reader makes its own copy, and
	// the elements are never written once added.
	hist := s.hist[:len(s.hist):len(s.hist)]
	return SessionInfo{
		ID: s.rec.ID, Root: s.rec.Root, Parent: s.rec.Parent, Spec: s.spec, Inline: s.rec.Inline, SystemPrompt: s.rec.SystemPrompt,
		Backend: s.rec.Backend, Model: s.rec.Model, Seed: s.rec.Seed, Params: s.rec.Params, Labels: s.rec.Labels,
		InitialObservation: s.rec.InitialObservation, History: hist,
	}
}

// envInfoLocked is infoLocked for making the session's environment, with
// the replica of its latest routed turn (a scan of the results a step's
// infoLocked does not need). The caller holds s.mu.
func (s *session) envInfoLocked() SessionInfo {
	info := s.infoLocked()
	info.Replica = s.lastReplicaLocked()
	return info
}

// lastReplicaLocked is the replica that served the latest turn recorded
// with one. The caller holds s.mu.
func (s *session) lastReplicaLocked() string {
	for i := len(s.hist) - 1; i >= 0; i-- {
		if r := s.result(i).Info.Replica; r != "" {
			return r
		}
	}
	return ""
}

// resultChunk is how many turns' results one chunk of session.results
// holds.
const resultChunk = 8

// result is the result of turn i+1. The caller holds s.mu.
func (s *session) result(i int) *StepResult {
	return &s.results[i/resultChunk][i%resultChunk]
}

// appendTurnLocked records the next turn. The caller holds s.mu.
func (s *session) appendTurnLocked(h HistoryTurn, r *StepResult) {
	i := len(s.hist)
	if i/resultChunk == len(s.results) {
		s.results = append(s.results, new([resultChunk]StepResult))
		// The history grows a chunk's worth at a time at least (doubling
		// from 8, not from 1).
		s.hist = slices.Grow(s.hist, resultChunk)
	}
	s.results[i/resultChunk][i%resultChunk] = *r
	s.hist = append(s.hist, h)
	s.turnBytes += turnBytes(h)
}

// turnsLocked is a copy of the recorded turns. The caller holds s.mu.
func (s *session) turnsLocked() []TurnRecord {
	turns := make([]TurnRecord, len(s.hist))
	for i, h := range s.hist {
		turns[i] = TurnRecord{Turn: i + 1, HistoryTurn: h, Result: *s.result(i)}
	}
	return turns
}

// newSession is a session of rec and spec holding turns (a fork's, or a
// stored session's).
func newSession(rec SessionRecord, spec *world.Spec, turns []TurnRecord, now time.Time) *session {
	s := &session{sem: make(chan struct{}, 1), rec: rec, spec: spec, lastUsed: now}
	if len(turns) > 0 {
		s.hist = make([]HistoryTurn, 0, len(turns)+resultChunk)
	}
	for i := range turns {
		s.appendTurnLocked(turns[i].HistoryTurn, &turns[i].Result)
	}
	return s
}
