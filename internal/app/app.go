// Package app assembles the simulator from a [Config]: the world specs
// (the bundled examples and a directory), the world model (the embedded
// replay, a replay directory, or routed model servers behind an optional
// transition cache), the session store, the fictional-world ledger, the
// step hooks, the [sim.Manager] and the MCP facade. It owns startup: [New]
// closes everything it opened when a later step fails and stops at
// startup's network calls when its context ends; [App.Close] closes what
// New opened, in reverse order.
//
// The HTTP server is not built here: `agentworld serve` hands the
// [App.Manager] and [App.MCP] to the server package, so server tests can
// assemble an App without an import cycle.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentworld/agentworld/examples"
	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/mcpworld"
	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/replay"
	"github.com/agentworld/agentworld/internal/route"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/tokencount"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldhooks"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// ErrConfig is the kind of every error that a [Config] field causes; the
// error is a [fielderr.Error] whose path names the field (WorldsDir,
// ModelName, CacheDir, …), which the CLI maps to its flag.
var ErrConfig = errors.New("invalid configuration")

// Config is everything `agentworld serve` (and `agentworld play`)
// configures of the simulator. The zero value runs the embedded default:
// the bundled example worlds, answered by replaying the bundled recordings,
// with sessions in memory.
type Config struct {
	// WorldsDir adds (and overrides by name) world specs from a directory
	// of spec files or a world library (internal/library: its worlds and a
	// world per task); "" adds none.
	WorldsDir string
	// ReplayStrict makes replay (the embedded default or replay:DIR)
	// refuse an action not recorded after its history instead of answering
	// the nearest recorded transition; false answers, marked approximate.
	ReplayStrict bool
	// ReplayMinSimilarity is how close a recorded action must be to answer
	// for another (replay.Options.MinSimilarity): 0 means
	// replay.DefaultMinSimilarity, negative answers with the nearest
	// recording however far.
	ReplayMinSimilarity float64
	// Model is the world model: "" for the embedded replay default,
	// "replay:DIR" to replay recordings from DIR, or the base URL of an
	// OpenAI-compatible server (http://host:8000/v1).
	Model string
	// ModelName is the model name sent in requests; required with a model
	// URL.
	ModelName string
	// Replicas are further base URLs serving the same model; with Model
	// they form the routed replica set. Nil means none.
	Replicas []string
	// ModelAPIKey is sent to the model servers; "" sends none.
	ModelAPIKey string
	// ModelTimeout bounds one request attempt to a model server; 0 means
	// worldmodel.DefaultTimeout.
	ModelTimeout time.Duration
	// ModelMaxResponseBytes caps one model answer; 0 means
	// worldmodel.DefaultMaxResponseBytes.
	ModelMaxResponseBytes int64
	// DBPath is the SQLite file; "" means in memory (nothing survives a
	// restart). It is not used with Cluster.
	DBPath string
	// Cluster, when set, keeps sessions in NATS JetStream shared with the
	// other nodes of a cluster instead of DBPath (see [ClusterConfig]);
	// nil runs a single node.
	Cluster *ClusterConfig
	// MaxSessions, IdleTTL and MaxTurns bound sessions (see sim.Options;
	// zero means sim's defaults).
	MaxSessions int
	IdleTTL     time.Duration
	MaxTurns    int
	// MaxInlineSpecBytes and MaxInlineTools bound inline world specs (see
	// sim.Options; 0 means sim's defaults, negative no limit).
	MaxInlineSpecBytes int
	MaxInlineTools     int
	// MaxSessionBytes bounds what one session holds (sim.Options; 0 means
	// sim's default, negative no limit).
	MaxSessionBytes int
	// SystemPrompt renders sessions' world-model system prompts (a
	// template version, see promptlib); nil means the built-in templates.
	SystemPrompt trajectory.SystemPromptFunc
	// AllowModels are model names, beside ModelName, a client may choose
	// for its session (its servers answer to them: adapters, aliases);
	// see sim.Options.Models. Nil allows none.
	AllowModels []string
	// AllowExtraBody are the sampling.extra_body keys a client's inline
	// spec may set (sim.Options.ExtraBodyKeys); nil allows none.
	AllowExtraBody []string
	// CacheDir puts a transition cache (record-and-replay, exact matches
	// only) in front of the world model and records new transitions there;
	// "" means no cache. It needs a model URL.
	CacheDir string
	// ContextBudget, MaxTokens and Temperature tune the world-model
	// backend (see sim.ModelOptions). ContextBudget 0 means the server's
	// max_model_len when CountTokens is "server" and the server says it,
	// else sim's default.
	ContextBudget int
	// CountTokens is how prompts are measured against the budget:
	// "estimate" (or "") uses tokencount.Estimate; "server" asks the model
	// server's tokenizer (vLLM's /tokenize, SGLang's /v1/tokenize) once per
	// message.
	CountTokens string
	MaxTokens   int
	Temperature *float64
	// MaxInFlight bounds concurrent requests per replica; 0 means route's
	// default.
	MaxInFlight int
	// PerturbLimits caps the latency perturbation rules inject, per step
	// and per session; the zero value means perturb's defaults.
	PerturbLimits perturb.Limits
	// SuccessJudge decides judged episode-success criteria
	// (reward.success.judge in a world spec); nil means none, and a world
	// declaring one is refused at startup.
	SuccessJudge *judge.SuccessJudge
	// Hooks and Backends extend the manager (perturbations, real
	// environments); nil adds none.
	Hooks    []sim.StepHook
	Backends map[string]sim.BackendFactory
	// Extend, when set, sees the assembled backends and the name of the
	// default one (the simulator) and returns backends to add or replace;
	// real environments use it to shadow the simulator.
	Extend func(backends map[string]sim.BackendFactory, simulator string) map[string]sim.BackendFactory
	// Observer is told about every step (the server's metrics); nil means
	// none.
	Observer sim.Observer
	// Registry receives the replica router's metrics; nil registers them
	// nowhere.
	Registry prometheus.Registerer
	// Logger receives startup and runtime logs; nil discards them.
	Logger *slog.Logger
}

// App is an assembled simulator and what it opened.
type App struct {
	// Manager runs the sessions.
	Manager *sim.Manager
	// Library is the replay library (embedded recordings, a replay:DIR, or
	// the transition cache), nil when none is used.
	Library *replay.Library
	// Router is the replica router, nil without model URLs.
	Router *route.Router
	// Describe says in one line what answers steps.
	Describe string
	// MCP serves the MCP, search and SWE worlds as MCP servers (the
	// server mounts it at /mcp/{world}; ServeStdio serves one session over
	// stdio).
	MCP *mcpworld.Facade
	// Ledger holds fictional worlds' facts, in the session database.
	Ledger *fiction.Ledger
	// Cluster is the JetStream session store and its ownership records
	// with Config.Cluster; nil without.
	Cluster *jetstore.Store

	// closers close what New opened, in opening order; Close runs them in
	// reverse.
	closers []closer
}

type closer struct {
	name  string
	close func(context.Context) error
}

// testHookStep, when set (by tests), runs after each startup step and
// fails New with its error, so every step's failure path can be tested.
var testHookStep func(step string) error

// step ends one startup step: it fails when ctx has ended (startup stops at
// Ctrl-C) or when the test hook says so.
func step(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("startup stopped after %s: %w", name, err)
	}
	if testHookStep != nil {
		return testHookStep(name)
	}
	return nil
}

// opened records a closer for what a step opened.
func (a *App) opened(name string, f func(context.Context) error) {
	a.closers = append(a.closers, closer{name, f})
}

// Close closes what New opened, the last opened first: the MCP facade,
// the manager (draining in-flight steps until ctx ends, then the store),
// the store when no manager took it, the router's health loop and the
// replay library. Close is safe to call again; a nil App closes nothing.
func (a *App) Close(ctx context.Context) error {
	if a == nil {
		return nil
	}
	var errs []error
	for _, c := range slices.Backward(a.closers) {
		if err := c.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", c.name, err))
		}
	}
	a.closers = nil
	return errors.Join(errs...)
}

// New assembles a simulator from cfg. When a step fails (or ctx ends) it
// closes everything the earlier steps opened before it returns.
func New(ctx context.Context, cfg Config) (_ *App, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, k := range cfg.AllowExtraBody {
		if slices.Contains(world.ReservedExtraKeys, k) {
			return nil, fielderr.New(ErrConfig, "AllowExtraBody", "%s is a field of the request itself, never allowed", k)
		}
	}
	var plan clusterPlan
	if cfg.Cluster != nil {
		if plan, err = checkCluster(ctx, cfg.Cluster); err != nil {
			return nil, err
		}
	}
	a := &App{}
	defer func() {
		if err != nil {
			if cerr := a.Close(context.Background()); cerr != nil {
				log.Warn("startup failed; closing what it opened failed too", "err", cerr)
			}
		}
	}()
	worlds, err := loadWorlds(cfg)
	if err != nil {
		return nil, err
	}
	if err := step(ctx, "worlds"); err != nil {
		return nil, err
	}
	backends, defaultBackend, err := a.worldModel(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	maps.Copy(backends, cfg.Backends)
	if cfg.Extend != nil {
		maps.Copy(backends, cfg.Extend(maps.Clone(backends), defaultBackend))
	}

	var st sim.Store
	var ledgerStore fiction.Store = &fiction.MemStore{}
	if cfg.Cluster != nil {
		if a.Cluster, err = a.openCluster(ctx, cfg.Cluster, plan, log); err != nil {
			return nil, err
		}
		// the nodes share each fictional world's ledger, as they share
		// sessions
		st, ledgerStore = a.Cluster, a.Cluster
	} else if cfg.DBPath != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.DBPath), 0o755); err != nil {
			return nil, fielderr.Wrap(ErrConfig, "DBPath", err)
		}
		db, err := store.Open(cfg.DBPath)
		if err != nil {
			return nil, fielderr.Wrap(ErrConfig, "DBPath", err)
		}
		// The manager closes the store when it closes; this closes it when
		// no manager was made, or the manager's drain ran out of time.
		a.opened("store", func(context.Context) error { return db.Close() })
		st, ledgerStore = db, db
		if err := step(ctx, "store"); err != nil {
			return nil, err
		}
	}
	a.Ledger = fiction.NewLedger(ledgerStore, &fiction.LedgerOptions{Logger: log})
	a.Manager = sim.New(&sim.Options{
		Store: st, Worlds: worlds, Backends: backends, DefaultBackend: defaultBackend, SystemPrompt: cfg.SystemPrompt,
		MaxSessions: cfg.MaxSessions, IdleTTL: cfg.IdleTTL, MaxTurns: cfg.MaxTurns,
		MaxInlineSpecBytes: cfg.MaxInlineSpecBytes, MaxInlineTools: cfg.MaxInlineTools,
		Models: servedModels(cfg), ExtraBodyKeys: cfg.AllowExtraBody, MaxSessionBytes: cfg.MaxSessionBytes, SuccessJudge: cfg.SuccessJudge,
		Hooks: append(worldControlHooks(a.Ledger, cfg.PerturbLimits, log), cfg.Hooks...), Observer: cfg.Observer, Logger: log,
	})
	a.opened("manager", a.Manager.Close)
	if err := step(ctx, "manager"); err != nil {
		return nil, err
	}
	a.MCP, err = newFacade(a.Manager, worlds, cfg.Cluster != nil, log)
	if err != nil {
		return nil, err
	}
	a.opened("MCP facade", a.MCP.Close)
	if err := step(ctx, "mcp"); err != nil {
		return nil, err
	}
	return a, nil
}

// servedModels are the model names a client may ask for: the one the
// model servers serve, when there are any, and those the operator added.
func servedModels(cfg Config) []string {
	var out []string
	if name := strings.TrimSpace(cfg.ModelName); name != "" && (cfg.Model != "" || len(cfg.Replicas) > 0) && !strings.HasPrefix(cfg.Model, "replay:") {
		out = append(out, name)
	}
	return append(out, cfg.AllowModels...)
}

// loadWorlds reads the bundled example worlds and cfg.WorldsDir over them.
func loadWorlds(cfg Config) (map[string]*world.Spec, error) {
	worlds, err := world.LoadFS(examples.FS, "worlds")
	if err != nil {
		return nil, fmt.Errorf("embedded example worlds: %w", err)
	}
	if cfg.WorldsDir != "" {
		var more map[string]*world.Spec
		if library.IsLibrary(cfg.WorldsDir) {
			// a generated library: its worlds, and one world per task
			// whose success rule is the task's check
			var lib *library.Library
			if lib, err = library.Open(cfg.WorldsDir); err == nil {
				more, err = lib.Specs()
			}
		} else {
			more, err = world.LoadDir(cfg.WorldsDir)
		}
		if err != nil {
			return nil, fielderr.Wrap(ErrConfig, "WorldsDir", err)
		}
		maps.Copy(worlds, more)
	}
	if cfg.SuccessJudge == nil {
		for _, name := range slices.Sorted(maps.Keys(worlds)) {
			if worlds[name].Reward.Judged() {
				return nil, fielderr.New(ErrConfig, "SuccessJudge", "world %q declares reward.success.judge, and no success judge is configured", name)
			}
		}
	}
	return worlds, nil
}

// worldModel opens what answers steps: a replay library, or the routed
// model servers (behind a transition cache when cfg.CacheDir is set). It
// returns the backends and the name of the default one.
func (a *App) worldModel(ctx context.Context, cfg Config, log *slog.Logger) (map[string]sim.BackendFactory, string, error) {
	backends := map[string]sim.BackendFactory{}
	urls := append([]string(nil), cfg.Replicas...)
	if cfg.Model != "" && !strings.HasPrefix(cfg.Model, "replay:") {
		urls = append([]string{cfg.Model}, urls...)
	}
	if cfg.CacheDir != "" && len(urls) == 0 {
		return nil, "", fielderr.New(ErrConfig, "CacheDir", "a transition cache needs a world model URL (Model or Replicas)")
	}
	switch {
	case strings.HasPrefix(cfg.Model, "replay:"):
		dir := strings.TrimPrefix(cfg.Model, "replay:")
		lib := replay.New(&replay.Options{Logger: log, Strict: cfg.ReplayStrict, MinSimilarity: cfg.ReplayMinSimilarity})
		if err := lib.LoadDir(dir); err != nil {
			return nil, "", fielderr.Wrap(ErrConfig, "Model", err)
		}
		a.useLibrary(lib)
		a.Describe = fmt.Sprintf("replay of %d recorded transitions from %s", lib.Len(), dir)
		backends[replay.BackendReplay] = replay.Backend(lib)
		return backends, replay.BackendReplay, step(ctx, "replay")
	case len(urls) == 0:
		lib := replay.New(&replay.Options{Logger: log, Strict: cfg.ReplayStrict, MinSimilarity: cfg.ReplayMinSimilarity})
		if err := lib.LoadFS(examples.FS, "recordings"); err != nil {
			return nil, "", fmt.Errorf("embedded recordings: %w", err)
		}
		a.useLibrary(lib)
		a.Describe = fmt.Sprintf("embedded default: replay of %d bundled recorded transitions (no world model given)", lib.Len())
		backends[replay.BackendReplay] = replay.Backend(lib)
		return backends, replay.BackendReplay, step(ctx, "replay")
	}
	if strings.TrimSpace(cfg.ModelName) == "" {
		return nil, "", fielderr.New(ErrConfig, "ModelName", "required with a model URL (vLLM and SGLang answer only to the name they serve)")
	}
	reps := make([]route.Replica, len(urls))
	clients := make(tokenizers, len(urls))
	for i, u := range urls {
		u = strings.TrimRight(u, "/")
		c := worldmodel.New(u, cfg.ModelName, &worldmodel.Options{APIKey: cfg.ModelAPIKey, MaxRetries: 2,
			Timeout: cfg.ModelTimeout, MaxResponseBytes: cfg.ModelMaxResponseBytes, Logger: log})
		reps[i] = route.Replica{Name: u, C: c, HealthURL: u + "/models"}
		clients[i] = c
	}
	a.Router = route.New(reps, &route.Options{MaxInFlight: cfg.MaxInFlight, HealthInterval: 15 * time.Second, Logger: log})
	a.opened("router", func(context.Context) error { a.Router.Close(); return nil })
	if cfg.Registry != nil {
		if err := cfg.Registry.Register(a.Router.Collector()); err != nil {
			return nil, "", fmt.Errorf("register router metrics: %w", err)
		}
	}
	if err := step(ctx, "router"); err != nil {
		return nil, "", err
	}
	mo := &sim.ModelOptions{Model: cfg.ModelName, MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature, ContextBudget: cfg.ContextBudget}
	counting, err := countTokens(ctx, cfg, clients, mo, log)
	if err != nil {
		return nil, "", err
	}
	if err := step(ctx, "tokens"); err != nil {
		return nil, "", err
	}
	var model sim.BackendFactory = sim.NewModelBackend(a.Router, mo)
	a.Describe = fmt.Sprintf("world model %q on %d replica(s): %s; %s", cfg.ModelName, len(urls), strings.Join(urls, ", "), counting)
	if cfg.CacheDir != "" {
		lib := replay.New(&replay.Options{Logger: log, Strict: cfg.ReplayStrict, MinSimilarity: cfg.ReplayMinSimilarity})
		a.useLibrary(lib)
		if _, err := os.Stat(cfg.CacheDir); err == nil {
			if err := lib.LoadDir(cfg.CacheDir); err != nil {
				return nil, "", fielderr.Wrap(ErrConfig, "CacheDir", err)
			}
		}
		if err := lib.RecordTo(cfg.CacheDir); err != nil {
			return nil, "", fielderr.Wrap(ErrConfig, "CacheDir", err)
		}
		model = replay.Cache(lib, cfg.ModelName, model)
		a.Describe += fmt.Sprintf(", behind a transition cache of %d in %s", lib.Len(), cfg.CacheDir)
		if err := step(ctx, "cache"); err != nil {
			return nil, "", err
		}
	}
	backends[sim.BackendModel] = model
	return backends, sim.BackendModel, nil
}

// useLibrary makes lib the app's replay library and closes it with the app.
func (a *App) useLibrary(lib *replay.Library) {
	a.Library = lib
	a.opened("replay library", func(context.Context) error { return lib.Close() })
}

// countTokens sets how mo measures prompts (cfg.CountTokens) and, when the
// budget is left to the server, its size; it returns a phrase for the
// startup line. A server that cannot count at startup is not fatal: model
// servers often come up after the simulator, and counting falls back to the
// estimate until they answer. The question is bounded by ctx and 10 s.
func countTokens(ctx context.Context, cfg Config, clients tokenizers, mo *sim.ModelOptions, log *slog.Logger) (string, error) {
	switch cfg.CountTokens {
	case "", "estimate":
		return "tokens estimated from text length", nil
	case "server":
	default:
		return "", fielderr.New(ErrConfig, "CountTokens", "%q: want estimate or server", cfg.CountTokens)
	}
	mo.Count = tokencount.Server(clients, &tokencount.Options{Logger: log})
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tc, err := clients.Tokenize(qctx, "hello")
	switch {
	case errors.Is(err, worldmodel.ErrNoTokenizer):
		return "", fielderr.Wrap(ErrConfig, "CountTokens", fmt.Errorf("server: %w; count with estimate for this server", err))
	case err != nil && ctx.Err() != nil:
		return "", fmt.Errorf("ask the model server to count tokens: %w", ctx.Err())
	case err != nil:
		log.Warn("the model server cannot count tokens yet; estimating until it can", "err", err)
	case cfg.ContextBudget == 0 && tc.MaxModelLen > 0:
		mo.ContextBudget = tc.MaxModelLen
		return fmt.Sprintf("tokens counted by the server, context %d (its max_model_len)", tc.MaxModelLen), nil
	}
	return "tokens counted by the server", nil
}

// tokenizers counts with the first replica that answers: replicas serve the
// same model, so any of them counts the same.
type tokenizers []*worldmodel.Client

func (ts tokenizers) Tokenize(ctx context.Context, text string) (worldmodel.TokenCount, error) {
	var err error
	for _, c := range ts {
		var tc worldmodel.TokenCount
		if tc, err = c.Tokenize(ctx, text); err == nil || ctx.Err() != nil {
			return tc, err
		}
	}
	return worldmodel.TokenCount{}, err
}

// worldControlHooks are the step hooks every simulator runs: the tool
// check first (a call the world's tools refuse is answered as a real
// server would, before anything else spends on it), then fictional
// worlds' ledger (world-state text), the documents a search reaches in a
// world that asks for retrieval, then perturbation rules (control
// text, direct faults, latency held to lim).
func worldControlHooks(l *fiction.Ledger, lim perturb.Limits, log *slog.Logger) []sim.StepHook {
	p := worldhooks.NewPerturbations(log)
	p.Limits = lim
	return []sim.StepHook{mcpworld.NewToolCalls(), worldhooks.NewLedger(l, log), worldhooks.NewRetrieval(log), p}
}

// newFacade serves every world that has an MCP form (mounted by the
// server at /mcp/{world}, where it checks Host headers itself). In a
// cluster an MCP session's id is its simulator session's, so any node
// routes its requests to the session's owner.
func newFacade(m *sim.Manager, worlds map[string]*world.Spec, cluster bool, log *slog.Logger) (*mcpworld.Facade, error) {
	var servable []*world.Spec
	for _, n := range slices.Sorted(maps.Keys(worlds)) {
		if mcpworld.Servable(worlds[n]) == nil {
			servable = append(servable, worlds[n])
		}
	}
	return mcpworld.NewFacade(mcpworld.Sessions{M: m}, servable, &mcpworld.Options{HostChecked: true, SessionIDs: cluster, Logger: log})
}

// DefaultDBPath is where sessions are kept when no path is given: the
// user's cache directory, else the working directory.
func DefaultDBPath() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "agentworld", "sessions.db")
	}
	return "agentworld-sessions.db"
}
