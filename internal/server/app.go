package server

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
	"github.com/agentworld/agentworld/internal/mcpworld"
	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/replay"
	"github.com/agentworld/agentworld/internal/route"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// AppConfig is everything `agentworld serve` (and `agentworld play`)
// configures. The zero value runs the embedded default: the bundled example
// worlds, answered by replaying the bundled recordings.
type AppConfig struct {
	// WorldsDir adds (and overrides by name) world specs from a directory.
	WorldsDir string
	// Model is the world model: "" for the embedded replay default,
	// "replay:DIR" to replay recordings from DIR, or the base URL of an
	// OpenAI-compatible server (http://host:8000/v1).
	Model string
	// ModelName is the model name sent in requests.
	ModelName string
	// Replicas are further base URLs serving the same model; with Model
	// they form the routed replica set.
	Replicas []string
	// ModelAPIKey is sent to the model servers.
	ModelAPIKey string
	// ModelTimeout bounds one request attempt to a model server; 0 means
	// worldmodel.DefaultTimeout.
	ModelTimeout time.Duration
	// ModelMaxResponseBytes caps one model answer; 0 means
	// worldmodel.DefaultMaxResponseBytes.
	ModelMaxResponseBytes int64
	// APIKey guards the server's routes (see Options.APIKey).
	APIKey string
	// DBPath is the SQLite file; "" means in memory (nothing survives a
	// restart).
	DBPath      string
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
	// AllowModels are model names, beside ModelName, a client may choose
	// for its session (its servers answer to them: adapters, aliases);
	// see sim.Options.Models.
	AllowModels []string
	// AllowExtraBody are the sampling.extra_body keys a client's inline
	// spec may set (sim.Options.ExtraBodyKeys); none by default.
	AllowExtraBody []string
	// CacheDir puts a transition cache (record-and-replay, exact matches
	// only) in front of the world model and records new transitions there.
	CacheDir string
	// ContextBudget, MaxTokens and Temperature tune the world-model
	// backend (see sim.ModelOptions). ContextBudget 0 means the server's
	// max_model_len when CountTokens is "server" and the server says it,
	// else sim's default.
	ContextBudget int
	// CountTokens is how prompts are measured against the budget:
	// "estimate" (or "") uses sim.EstimateTokens; "server" asks the model
	// server's tokenizer (vLLM's /tokenize, SGLang's /v1/tokenize) once per
	// message.
	CountTokens string
	MaxTokens   int
	Temperature *float64
	// MaxInFlight bounds concurrent requests per replica.
	MaxInFlight int
	// DefaultWorld is OpenEnv /reset's world.
	DefaultWorld string
	// Edge bounds the HTTP edge (allowed Host and Origin headers,
	// timeouts, connection limit); the zero value is the safe default.
	Edge Edge
	// PerturbLimits caps the latency perturbation rules inject, per step
	// and per session; the zero value means perturb's defaults.
	PerturbLimits perturb.Limits
	// Hooks and Backends extend the manager (perturbations, real
	// environments).
	Hooks    []sim.StepHook
	Backends map[string]sim.BackendFactory
	// Extend, when set, sees the assembled backends and the name of the
	// default one (the simulator) and returns backends to add or replace;
	// real environments use it to shadow the simulator.
	Extend func(backends map[string]sim.BackendFactory, simulator string) map[string]sim.BackendFactory
	Logger *slog.Logger
}

// App is an assembled simulator: manager, HTTP server, and what they own.
type App struct {
	Manager *sim.Manager
	Server  *Server
	// Library is the replay library (embedded recordings, a replay:DIR, or
	// the transition cache), nil when none is used.
	Library *replay.Library
	// Router is the replica router, nil without model URLs.
	Router *route.Router
	// Describe says in one line what answers steps.
	Describe string
	// MCP serves the MCP, search and SWE worlds as MCP servers (mounted
	// at /mcp/{world}; ServeStdio for one session over stdio).
	MCP *mcpworld.Facade
	// Ledger holds fictional worlds' facts, in the session database.
	Ledger *fiction.Ledger
}

// countTokens sets how mo measures prompts (cfg.CountTokens) and, when the
// budget is left to the server, its size; it returns a phrase for the
// startup line. A server that cannot count at startup is not fatal: model
// servers often come up after the simulator, and counting falls back to the
// estimate until they answer.
func countTokens(cfg AppConfig, clients tokenizers, mo *sim.ModelOptions, log *slog.Logger) (string, error) {
	switch cfg.CountTokens {
	case "", "estimate":
		return "tokens estimated from text length", nil
	case "server":
	default:
		return "", fmt.Errorf("--count-tokens %q: want estimate or server", cfg.CountTokens)
	}
	mo.Count = sim.ServerCounter(clients, &sim.CounterOptions{Logger: log})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc, err := clients.Tokenize(ctx, "hello")
	switch {
	case errors.Is(err, worldmodel.ErrNoTokenizer):
		return "", fmt.Errorf("--count-tokens server: %w; use --count-tokens estimate with this server", err)
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

// NewApp assembles a simulator from cfg.
func NewApp(cfg AppConfig) (*App, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, k := range cfg.AllowExtraBody {
		if slices.Contains(world.ReservedExtraKeys, k) {
			return nil, fmt.Errorf("--allow-extra-body %s: a field of the request itself, never allowed", k)
		}
	}
	if err := cfg.Edge.Validate(); err != nil {
		return nil, err
	}
	worlds, err := world.LoadFS(examples.FS, "worlds")
	if err != nil {
		return nil, fmt.Errorf("embedded example worlds: %w", err)
	}
	if cfg.WorldsDir != "" {
		more, err := world.LoadDir(cfg.WorldsDir)
		if err != nil {
			return nil, fmt.Errorf("--worlds %s: %w", cfg.WorldsDir, err)
		}
		maps.Copy(worlds, more)
	}
	app := &App{}
	backends := map[string]sim.BackendFactory{}
	defaultBackend := sim.BackendModel
	urls := append([]string(nil), cfg.Replicas...)
	switch {
	case strings.HasPrefix(cfg.Model, "replay:"):
		dir := strings.TrimPrefix(cfg.Model, "replay:")
		lib := replay.New(&replay.Options{Logger: log})
		if err := lib.LoadDir(dir); err != nil {
			return nil, fmt.Errorf("--model %s: %w", cfg.Model, err)
		}
		app.Library = lib
		app.Describe = fmt.Sprintf("replay of %d recorded transitions from %s", lib.Len(), dir)
		defaultBackend = replay.BackendReplay
	case cfg.Model != "":
		urls = append([]string{cfg.Model}, urls...)
	case len(urls) == 0:
		lib := replay.New(&replay.Options{Logger: log})
		if err := lib.LoadFS(examples.FS, "recordings"); err != nil {
			return nil, fmt.Errorf("embedded recordings: %w", err)
		}
		app.Library = lib
		app.Describe = fmt.Sprintf("embedded default: replay of %d bundled recorded transitions (no --model given)", lib.Len())
		defaultBackend = replay.BackendReplay
	}
	if app.Library != nil {
		backends[replay.BackendReplay] = replay.Backend(app.Library)
	}
	if len(urls) > 0 && strings.TrimSpace(cfg.ModelName) == "" {
		return nil, errors.New("--model-name is required with a model URL (vLLM and SGLang answer only to the name they serve)")
	}
	if len(urls) > 0 {
		reps := make([]route.Replica, len(urls))
		clients := make(tokenizers, len(urls))
		for i, u := range urls {
			u = strings.TrimRight(u, "/")
			c := worldmodel.New(u, cfg.ModelName, &worldmodel.Options{APIKey: cfg.ModelAPIKey, MaxRetries: 2,
				Timeout: cfg.ModelTimeout, MaxResponseBytes: cfg.ModelMaxResponseBytes, Logger: log})
			reps[i] = route.Replica{Name: u, C: c, HealthURL: u + "/models"}
			clients[i] = c
		}
		app.Router = route.New(reps, &route.Options{MaxInFlight: cfg.MaxInFlight, HealthInterval: 15 * time.Second, Logger: log})
		mo := &sim.ModelOptions{Model: cfg.ModelName, MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature, ContextBudget: cfg.ContextBudget}
		counting, err := countTokens(cfg, clients, mo, log)
		if err != nil {
			return nil, err
		}
		var model sim.BackendFactory = sim.NewModelBackend(app.Router, mo)
		app.Describe = fmt.Sprintf("world model %q on %d replica(s): %s; %s", cfg.ModelName, len(urls), strings.Join(urls, ", "), counting)
		if cfg.CacheDir != "" {
			lib := replay.New(&replay.Options{Logger: log})
			if _, err := os.Stat(cfg.CacheDir); err == nil {
				if err := lib.LoadDir(cfg.CacheDir); err != nil {
					return nil, fmt.Errorf("--cache %s: %w", cfg.CacheDir, err)
				}
			}
			if err := lib.RecordTo(cfg.CacheDir); err != nil {
				return nil, err
			}
			model = replay.Cache(lib, cfg.ModelName, model)
			app.Library = lib
			app.Describe += fmt.Sprintf(", behind a transition cache of %d in %s", lib.Len(), cfg.CacheDir)
		}
		backends[sim.BackendModel] = model
		defaultBackend = sim.BackendModel
	} else if cfg.CacheDir != "" {
		return nil, errors.New("--cache needs a world model URL (--model or --replica)")
	}
	maps.Copy(backends, cfg.Backends)
	if cfg.Extend != nil {
		maps.Copy(backends, cfg.Extend(maps.Clone(backends), defaultBackend))
	}

	var st sim.Store
	var ledgerStore fiction.Store = &fiction.MemStore{}
	if cfg.DBPath != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.DBPath), 0o755); err != nil {
			return nil, err
		}
		db, err := store.Open(cfg.DBPath)
		if err != nil {
			return nil, err
		}
		st = db
		ledgerStore = db
	}
	app.Ledger = fiction.NewLedger(ledgerStore, &fiction.LedgerOptions{Logger: log})
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	if app.Router != nil {
		reg.MustRegister(app.Router.Collector())
	}
	app.Manager = sim.New(&sim.Options{
		Store: st, Worlds: worlds, Backends: backends, DefaultBackend: defaultBackend,
		MaxSessions: cfg.MaxSessions, IdleTTL: cfg.IdleTTL, MaxTurns: cfg.MaxTurns,
		MaxInlineSpecBytes: cfg.MaxInlineSpecBytes, MaxInlineTools: cfg.MaxInlineTools,
		Models: servedModels(cfg), ExtraBodyKeys: cfg.AllowExtraBody, MaxSessionBytes: cfg.MaxSessionBytes,
		Hooks: append(worldControlHooks(app.Ledger, cfg.PerturbLimits, log), cfg.Hooks...), Observer: met, Logger: log,
	})
	app.Server = New(app.Manager, &Options{APIKey: cfg.APIKey, DefaultWorld: cfg.DefaultWorld, Edge: cfg.Edge, Registry: reg, Metrics: met, Logger: log})
	if err := app.mountMCP(worlds, log); err != nil {
		return nil, err
	}
	return app, nil
}

// servedModels are the model names a client may ask for: the one the
// model servers serve, when there are any, and those the operator added.
func servedModels(cfg AppConfig) []string {
	var out []string
	if name := strings.TrimSpace(cfg.ModelName); name != "" && (cfg.Model != "" || len(cfg.Replicas) > 0) && !strings.HasPrefix(cfg.Model, "replay:") {
		out = append(out, name)
	}
	return append(out, cfg.AllowModels...)
}

// Close releases what the app owns beyond the server (the router's health
// loop, the cache file). Server.Serve closes the Manager itself; call
// Manager.Close when the app was used without serving.
func (a *App) Close() error {
	if a.Router != nil {
		a.Router.Close()
	}
	if a.Library != nil {
		return a.Library.Close()
	}
	return nil
}

// DefaultDBPath is where sessions are kept when --db is not given: the
// user's cache directory, else the working directory.
func DefaultDBPath() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "agentworld", "sessions.db")
	}
	return "agentworld-sessions.db"
}
