package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/cluster"
	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/play"
	"github.com/agentworld/agentworld/internal/replay"
	"github.com/agentworld/agentworld/internal/server"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/tracing"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// simFlags are the flags serve and play share.
type simFlags struct {
	cfg app.Config
	// srv is the HTTP server's part (serve only).
	srv         server.Options
	temperature float64
	noDB        bool
	real        realFlags
	// successJudge is the model judging reward.success.judge criteria.
	successJudge transportFlags
	tmpl         templateFlags
	// otelEndpoint, when set, traces every step there (serve only).
	otelEndpoint string
}

func (f *simFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.cfg.WorldsDir, "worlds", "", "directory of world specs to load beside the bundled examples")
	fl.StringVar(&f.cfg.Model, "model", "", "world model: base URL of an OpenAI-compatible server (http://host:8000/v1) or replay:DIR; empty replays the bundled recordings")
	fl.StringVar(&f.cfg.ModelName, "model-name", "", "model name sent to the world-model server")
	fl.DurationVar(&f.cfg.ModelTimeout, "model-timeout", worldmodel.DefaultTimeout, "timeout of one request attempt to the world model (reading the answer included); a timed-out attempt is retried")
	fl.Int64Var(&f.cfg.ModelMaxResponseBytes, "model-max-response-bytes", worldmodel.DefaultMaxResponseBytes, "largest world-model answer read, in bytes; a larger one fails the step (503) unread")
	fl.BoolVar(&f.cfg.ReplayStrict, "replay-strict", false, "with replay (no --model, or replay:DIR): refuse an action not recorded after its history (400 naming the nearest recorded action) instead of answering that nearest transition")
	fl.Float64Var(&f.cfg.ReplayMinSimilarity, "replay-min-similarity", replay.DefaultMinSimilarity, "with replay: the share of words a recorded action must have in common with the one sent to answer for it (an approximate answer); below it the step gets an \"unrecorded action\" observation naming the nearest recorded actions; negative: the nearest however far")
	fl.StringArrayVar(&f.cfg.Replicas, "replica", nil, "another base URL serving the same model (repeatable); sessions stick to one replica")
	fl.StringVar(&f.cfg.CacheDir, "cache", "", "transition cache directory in front of the world model (exact-match replay; new transitions are recorded there)")
	fl.IntVar(&f.cfg.ContextBudget, "context-budget", 0, "model context in tokens; history beyond it is truncated in chunks (0: the server's max_model_len with --count-tokens server, else 131072)")
	fl.StringVar(&f.cfg.CountTokens, "count-tokens", "estimate", "how prompt tokens are counted for the context budget: estimate (bytes and characters) or server (the model server's tokenizer: vLLM's /tokenize, SGLang's /v1/tokenize)")
	fl.IntVar(&f.cfg.MaxTokens, "max-tokens", 32768, "generation budget per step (thinking included)")
	fl.Float64Var(&f.temperature, "temperature", 0.6, "sampling temperature when the world spec sets none")
	fl.IntVar(&f.cfg.MaxInFlight, "max-inflight", 256, "concurrent requests per replica")
	fl.IntVar(&f.cfg.MaxTurns, "max-turns", 200, "steps before an episode is truncated (a world spec's max_turns wins)")
	fl.StringVar(&f.cfg.DBPath, "db", app.DefaultDBPath(), "SQLite file holding sessions and transcripts")
	fl.BoolVar(&f.noDB, "no-db", false, "keep sessions in memory only")
	usesEnv(cmd, envconfig.ModelAPIKey)
	fl.DurationVar(&f.cfg.PerturbLimits.MaxStepLatency, "max-step-latency", perturb.DefaultMaxStepLatency, "cap on the latency perturbation rules inject into one step (a world spec may only lower it)")
	fl.DurationVar(&f.cfg.PerturbLimits.MaxSessionLatency, "max-session-latency", perturb.DefaultMaxSessionLatency, "cap on the latency perturbation rules inject over a session's steps (a world spec may only lower it)")
	f.successJudge.register(cmd, "success-judge-", "success judge", envconfig.JudgeAPIKey, envconfig.OpenAIAPIKey)
	fl.StringVar(&f.successJudge.model, "success-judge-model", "", "model name of the success judge (with --success-judge-url): decides world specs' reward.success.judge criteria when an episode ends")
	f.real.register(cmd)
	f.tmpl.register(cmd, "the world-model system-prompt template version new sessions are rendered with (a name like v3, or an id prefix); empty: the library's promoted version, else the built-in v0")
}

// applySuccessJudge makes the success judge of the flags, when given.
func (f *simFlags) applySuccessJudge(cmd *cobra.Command) error {
	j := &f.successJudge
	if j.url == "" && j.model == "" {
		return nil
	}
	if err := need(map[string]string{"--success-judge-url": j.url, "--success-judge-model": j.model}); err != nil {
		return err
	}
	f.cfg.SuccessJudge = judge.NewSuccessJudge(j.client(cmd), j.model, nil)
	return nil
}

// configFlags maps the app.Config fields to the flags that set them, so a
// configuration error names what the user typed.
var configFlags = map[string]string{
	"WorldsDir": "worlds", "Model": "model", "ModelName": "model-name", "Replicas": "replica",
	"CacheDir": "cache", "CountTokens": "count-tokens", "DBPath": "db", "AllowExtraBody": "allow-extra-body",
	"SuccessJudge": "success-judge-url", "Cluster.URL": "cluster", "Cluster.StoreDir": "nats-store",
	"Cluster.Listen": "nats-listen", "Cluster.Routes": "nats-routes", "Cluster.Node": "node", "Cluster.Addr": "advertise",
	"Cluster.Replicas": "nats-replicas",
}

// configErr names the flag of the app.Config field err is about.
func configErr(err error) error {
	fe, ok := fielderr.As(err)
	if !ok || !errors.Is(err, app.ErrConfig) {
		return err
	}
	if flag, ok := configFlags[fe.Path]; ok {
		return flagErr(flag, errors.New(fe.Detail()))
	}
	return err
}

// simulator is what serve runs: the assembled app and the HTTP server
// over its manager.
type simulator struct {
	*app.App
	Server *server.Server
	// Tracer exports the steps' spans; nil when tracing is off.
	Tracer *tracing.Tracer
}

// serve assembles the app with the server's metrics and the server over
// it. The caller closes the app (after Serve returns, so steps drain).
func (f *simFlags) serve(cmd *cobra.Command) (*simulator, error) {
	if err := f.srv.Edge.Validate(); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	met := server.NewMetrics(reg)
	var tr *tracing.Tracer
	if f.otelEndpoint != "" {
		var err error
		if tr, err = tracing.New(f.otelEndpoint, "agentworld serve"); err != nil {
			return nil, err
		}
	}
	f.cfg.Observer, f.cfg.Registry = tr.Observer(met), reg
	a, err := f.app(cmd)
	if err != nil {
		return nil, errors.Join(err, tr.Close(context.Background()))
	}
	o := f.srv
	o.Registry, o.Metrics, o.MCP, o.Logger = reg, met, a.MCP, logger(cmd)
	if a.Cluster != nil {
		o.Sessions = cluster.New(a.Cluster, &cluster.Options{Evict: a.Manager.Evict, Logger: logger(cmd)})
		o.Groups = a.Cluster
		o.Ready = a.Cluster.Ready
	}
	o.Edge.Hints = settingHints("serve", serveSettingFlags)
	return &simulator{App: a, Server: server.New(a.Manager, &o), Tracer: tr}, nil
}

// How long serve's shutdown may take after SIGTERM, step by step: the
// HTTP server drains ([server.DefaultDrainTimeout]), the app closes
// (in-flight steps finish, a cluster node hands back its lease so its
// sessions move at once instead of after the lease), then the last spans
// go out. A supervisor must wait at least [ServeStopBound] before SIGKILL
// (deploy/ sets Kubernetes' terminationGracePeriodSeconds and compose's
// stop_grace_period from it, and its tests check them).
const (
	appCloseTimeout    = 30 * time.Second
	tracerCloseTimeout = 10 * time.Second
	// ServeStopBound is the longest a graceful `agentworld serve`
	// shutdown takes.
	ServeStopBound = server.DefaultDrainTimeout + appCloseTimeout + tracerCloseTimeout
)

// closeApp closes a, giving in-flight steps up to appCloseTimeout to drain.
func closeApp(a *app.App) error {
	ctx, cancel := context.WithTimeout(context.Background(), appCloseTimeout)
	defer cancel()
	return a.Close(ctx)
}

// closeSim closes the app, then sends the spans of its last steps.
func closeSim(s *simulator) error {
	err := closeApp(s.App)
	ctx, cancel := context.WithTimeout(context.Background(), tracerCloseTimeout)
	defer cancel()
	return errors.Join(err, s.Tracer.Close(ctx))
}

func (f *simFlags) app(cmd *cobra.Command) (*app.App, error) {
	f.cfg.Temperature = &f.temperature
	if f.noDB {
		f.cfg.DBPath = ""
	}
	if f.cfg.ModelAPIKey == "" {
		f.cfg.ModelAPIKey = envconfig.ModelAPIKey.Value()
	}
	f.cfg.Logger = logger(cmd)
	if err := f.applySuccessJudge(cmd); err != nil {
		return nil, err
	}
	v, err := f.tmpl.version()
	if err != nil {
		return nil, err
	}
	f.cfg.SystemPrompt = v.SystemPrompt()
	realWorlds, err := f.real.apply(cmd, &f.cfg)
	if err != nil {
		return nil, err
	}
	ctx := cmd.Context()
	if ctx == nil { // a command not run by Execute (tests)
		ctx = context.Background()
	}
	a, err := app.New(ctx, f.cfg)
	if err != nil {
		return nil, configErr(err)
	}
	addRealWorlds(a.Manager, realWorlds)
	return a, nil
}

// storeInUse says where serve keeps its sessions, for its startup log: a
// cluster node uses JetStream, never --db.
func storeInUse(cfg app.Config) string {
	switch c := cfg.Cluster; {
	case c != nil && c.URL != "":
		return "JetStream at " + c.URL
	case c != nil:
		return "embedded JetStream in " + c.StoreDir
	case cfg.DBPath == "":
		return "memory"
	default:
		return "SQLite " + cfg.DBPath
	}
}

func newServeCmd() *cobra.Command {
	var f simFlags
	var addr string
	var uc uiConfig
	var cl clusterFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve simulated environments: native session API, OpenEnv HTTP/WebSocket, metrics",
		Long: `Serve environments simulated by a language world model.

With no flags it runs the embedded default: the bundled example worlds,
answered by replaying the bundled recorded trajectories (every step's
info.backend says "replay"; info.approximate marks a nearest-neighbour
answer). Point --model (and --replica) at vLLM or SGLang servers for real
simulation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.srv.APIKey == "" {
				f.srv.APIKey = envconfig.APIKey.Value()
			}
			var err error
			if f.cfg.Cluster, err = cl.config(addr); err != nil {
				return err
			}
			// --addr is taken before startup, which can take a minute
			// (a cluster's store waits for the other nodes), so a port in
			// use fails at once
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return flagErr("addr", err)
			}
			s, err := f.serve(cmd)
			if err != nil {
				return errors.Join(err, ln.Close())
			}
			log := logger(cmd)
			log.Info("agentworld serve", "addr", ln.Addr().String(), "worlds", len(s.Manager.Worlds()), "backend", s.Describe, "store", storeInUse(f.cfg), "cluster", s.Cluster != nil, "auth", f.srv.APIKey != "")
			fmt.Fprintf(cmd.ErrOrStderr(), "serving on http://%s (%s)\n", ln.Addr(), s.Describe)
			if uc.addr == "" {
				err = s.Server.Serve(cmd.Context(), ln)
				return errors.Join(err, closeSim(s))
			}
			// The web UI on its own address, behind the same edge settings,
			// reading this serve's session database.
			uc.db, uc.edge = f.cfg.DBPath, f.srv.Edge
			serveUI, err := startUI(cmd, uc)
			if err != nil {
				return errors.Join(err, ln.Close(), closeSim(s))
			}
			// Either server stopping stops the other.
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			uiDone := make(chan error, 1)
			go func() { // ends when ctx does
				err := serveUI(ctx)
				cancel()
				uiDone <- err
			}()
			err = s.Server.Serve(ctx, ln)
			cancel()
			return errors.Join(err, <-uiDone, closeSim(s))
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", "127.0.0.1:8080", "listen address")
	fl.StringVar(&f.srv.APIKey, "api-key", "", "require this bearer token on every route but /health (default: "+envconfig.APIKey.Name+")")
	usesEnv(cmd, envconfig.APIKey)
	fl.IntVar(&f.cfg.MaxSessions, "max-sessions", 10000, "sessions held open at once")
	fl.IntVar(&f.cfg.MaxInlineSpecBytes, "max-inline-spec-bytes", sim.DefaultMaxInlineSpecBytes, "largest world spec a client may send inline, in bytes (larger worlds: --worlds and world_id); -1: no limit")
	fl.IntVar(&f.cfg.MaxInlineTools, "max-inline-tools", sim.DefaultMaxInlineTools, "most tools an inline world spec may define; -1: no limit")
	fl.IntVar(&f.cfg.MaxSessionBytes, "max-session-bytes", sim.DefaultMaxSessionBytes, "bytes one session may hold (spec, system prompt, every turn's text); the step that reaches it truncates the episode; -1: no limit")
	fl.StringSliceVar(&f.cfg.AllowModels, "allow-model", nil, "a model name, beside --model-name, clients may choose for a session (repeatable; the model servers must answer to it)")
	fl.StringSliceVar(&f.cfg.AllowExtraBody, "allow-extra-body", nil, "a sampling.extra_body key clients' inline world specs may set, e.g. top_k (repeatable; none by default; request fields such as model, messages, n are never allowed)")
	fl.DurationVar(&f.cfg.IdleTTL, "idle-ttl", 0, "expire sessions idle this long (default 30m)")
	fl.StringVar(&f.srv.DefaultWorld, "default-world", "", "world for OpenEnv /reset without world_id (default: first by name)")
	registerEdgeFlags(cmd, &f.srv.Edge, true)
	fl.StringVar(&f.otelEndpoint, "otel-endpoint", "", "OTLP HTTP receiver (e.g. http://localhost:4318) to send a span of every step to, in the OpenTelemetry GenAI conventions (default: off)")
	fl.StringVar(&uc.addr, "ui", "", "also serve the web UI (agentworld ui) on this address, over this serve's --db")
	fl.StringSliceVar(&uc.runs, "ui-runs", nil, "with --ui: benchmark run directories to show (repeatable)")
	fl.StringVar(&uc.labels, "ui-labels", "", "with --ui: label database; turns human labelling on")
	cl.register(cmd)
	return cmd
}

// openSim opens what play and rollout run against: with remote, a client
// of that running server (key, else the environment's API key); without,
// the in-process app, keeping sessions in memory unless --db is given. The
// caller closes a non-nil app.
func (f *simFlags) openSim(cmd *cobra.Command, remote, key string) (*api.Client, *app.App, error) {
	if remote != "" {
		if key == "" {
			key = envconfig.APIKey.Value()
		}
		return &api.Client{BaseURL: remote, APIKey: key}, nil, nil
	}
	if !cmd.Flags().Changed("db") {
		f.noDB = true
	}
	a, err := f.app(cmd)
	return nil, a, err
}

// registerInMemory registers the simulator flags of a command whose
// in-process simulator keeps sessions in memory unless --db is given (see
// openSim): its help shows no default database it would not use.
func (f *simFlags) registerInMemory(cmd *cobra.Command) {
	f.register(cmd)
	db := cmd.Flags().Lookup("db")
	f.cfg.DBPath, db.DefValue = "", ""
	db.Usage = "SQLite file holding sessions and transcripts (default: kept in memory, gone when the command ends)"
}

func newPlayCmd() *cobra.Command {
	var f simFlags
	var remote, key string
	var stepTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "play WORLD",
		Short: "Play a simulated world in the terminal: type actions, read observations",
		Long: `Open a session of WORLD and play it by hand. Without --server the
simulator runs in-process with the same flags as serve (by default the
embedded replay over the bundled worlds, e.g. "agentworld play
python-terminal"); with --server it plays against a running server.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var p play.Player
			cl, a, err := f.openSim(cmd, remote, key)
			if err != nil {
				return err
			}
			if a != nil {
				defer closeApp(a)
				p = play.Manager{M: a.Manager}
			} else {
				if stepTimeout == 0 {
					stepTimeout = -1 // the flag's 0 is no limit, not the default
				}
				p = play.Remote(cl, &play.RemoteOptions{StepTimeout: stepTimeout})
			}
			return play.Play(ctx, p, args[0], cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	f.registerInMemory(cmd)
	cmd.Flags().StringVar(&remote, "server", "", "play against a running server at this URL instead of in-process")
	cmd.Flags().StringVar(&key, "api-key", "", "bearer token for --server (default: "+envconfig.APIKey.Name+")")
	cmd.Flags().DurationVar(&stepTimeout, "step-timeout", play.DefaultStepTimeout, "with --server, how long one step (or opening the session) may take before it is reported as failed; 0: no limit")
	usesEnv(cmd, envconfig.APIKey)
	return cmd
}
