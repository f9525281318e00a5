package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/rollout"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// rolloutFlags are rollout's settings. A queue's workers rebuild them
// from the coordinator's command line (jobFlags), so they run the
// episodes as the coordinator would have.
type rolloutFlags struct {
	f                 simFlags
	tasksPath, out    string
	remote, remoteKey string
	pol               rollout.Policy
	polTemp           float64
	opts              rollout.Options
	stepTimeout       time.Duration
	curriculum        bool
	histPath          string
}

// rolloutCoordinatorFlags are the flags of a run that its queue's
// workers do not take: the coordinator's input, output and queue, and
// the bound of its own process.
var rolloutCoordinatorFlags = []string{"tasks", "out", "curriculum", "pass-history", "concurrency", "db", "no-db", "queue", "ack-wait"}

func newRolloutCmd() *cobra.Command {
	var (
		r rolloutFlags
		q queueFlags
	)
	cmd := &cobra.Command{
		Use:   "rollout --tasks FILE|DIR --policy-url URL --policy-model M --out DIR",
		Short: "Drive an agent policy through simulated worlds in groups of forks (Sim RL rollouts)",
		Long: `For each task, reset its world once (the root session) and fork the
root --group-size times, so the members of a group share their initial
state and prompt; drive each fork with the policy (an OpenAI-compatible
server) until the episode ends or --episode-turns run out. MCP, search and
SWE worlds give the policy their tools; the other domains expect the
domain's text action. Rows go to DIR/episodes.jsonl (one per trajectory,
token ids and logprobs as the policy server returned them), group
statistics to DIR/summary.json (with how many groups carried signal:
rewards that differ). A rerun with the same --out resumes: no finished
episode runs again. Each run appends its per-task pass counts to a pass
history (--pass-history, default pass-history.jsonl beside DIR);
--curriculum then runs only the tasks whose pass rate over that history
lies strictly between 0 and 1 (a group of equal rewards teaches GRPO
nothing), and tasks not tried yet.

Tasks are JSONL rows {"id", "world", "instruction", "max_turns", "seed"}
(a directory: every *.jsonl in it), or a world library made by
"agentworld world generate": its tasks run in the worlds that carry their
checks, and without --sim or --worlds the in-process simulator loads it.
Without --sim the simulator runs in-process with serve's flags (by default the embedded replay over the
bundled worlds); with --sim it uses a running serve's session API.

With --queue nats://HOST:4222 this process only coordinates: every
episode becomes an item of a NATS JetStream work queue, and processes
running "agentworld rollout worker --queue" (on any machine) run them
with this command's settings; their rows land in DIR as a local run's
do, and a rerun resumes the same way. Workers read API keys from their
own environment (` + envconfig.PolicyAPIKey.Name + `, ...), never from the queue.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if r.tasksPath == "" {
				return flagErr("tasks", errors.New("required"))
			}
			if r.out == "" {
				return flagErr("out", errors.New("required"))
			}
			if err := r.checkPolicy(); err != nil {
				return err
			}
			tasks, err := r.tasks(cmd)
			if err != nil {
				return err
			}
			if r.histPath == "" {
				r.histPath = rollout.DefaultHistoryPath(r.out)
			}
			if r.curriculum {
				hist, err := rollout.ReadHistory(r.histPath)
				if err != nil {
					return flagErr("pass-history", err)
				}
				var cs rollout.CurriculumStats
				tasks, cs = rollout.Curriculum(tasks, hist)
				fmt.Fprintf(cmd.ErrOrStderr(), "curriculum (%s): %d tasks with a pass rate strictly between 0 and 1, %d not tried yet; left out %d always failed, %d always passed\n",
					r.histPath, cs.Kept, cs.Unseen, cs.AlwaysFailed, cs.AlwaysPassed)
				if len(tasks) == 0 {
					return flagErr("curriculum", errors.New("no task left: every task always passed or always failed"))
				}
			}
			opts, err := r.options(cmd)
			if err != nil {
				return err
			}
			opts.Progress = cmd.ErrOrStderr()
			// An --out that cannot be a directory is refused here, naming
			// the flag, before a queue job or a simulator is opened.
			if err := os.MkdirAll(r.out, 0o755); err != nil {
				return flagErr("out", err)
			}
			var s rollout.Simulator
			var coord *workqueue.Coordinator
			if q.url != "" {
				if coord, err = r.openQueue(cmd, &q); err != nil {
					return err
				}
				opts.Queue = coord
			} else {
				var closeSim func()
				if s, closeSim, err = r.simulator(cmd, opts); err != nil {
					return err
				}
				defer closeSim()
			}
			res, err := rollout.Run(cmd.Context(), s, tasks, r.out, opts)
			if coord != nil {
				err = errors.Join(err, q.close(cmd, coord, res != nil))
			}
			if errors.Is(err, rollout.ErrSettingsChanged) {
				return fmt.Errorf("%w (the output directory is --out)", err)
			}
			if res != nil && len(res.Workers) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "episodes by worker: %s\n", countsByName(res.Workers))
			}
			if res != nil && res.Summary != nil {
				sum := res.Summary
				fmt.Fprintf(cmd.OutOrStdout(), "%d episodes in %d groups: reward mean %.3f, pass@1 %.3f, pass@%d %.3f; %d of %d groups carried signal (%s)\n",
					sum.Episodes, len(sum.Groups), sum.RewardMean, sum.PassAt1, sum.K, sum.PassAtK, sum.SignalGroups, len(sum.Groups), r.out)
				abs, aerr := filepath.Abs(r.out)
				if aerr != nil {
					abs = r.out
				}
				if herr := rollout.AppendHistory(r.histPath, abs, sum); herr != nil {
					err = errors.Join(err, fmt.Errorf("pass history: %w", herr))
				}
			}
			return err
		},
	}
	r.register(cmd)
	q.register(cmd, "episode")
	cmd.AddCommand(newRolloutWorkerCmd())
	return cmd
}

func (r *rolloutFlags) register(cmd *cobra.Command) {
	r.f.registerInMemory(cmd)
	fl := cmd.Flags()
	fl.StringVar(&r.tasksPath, "tasks", "", "tasks: a JSONL file or a directory of them")
	fl.StringVar(&r.out, "out", "", "run directory: episodes.jsonl and summary.json (a rerun resumes)")
	fl.StringVar(&r.pol.URL, "policy-url", "", "policy server base URL (http://host:8000/v1); {session_id} is replaced by the episode's session id")
	fl.StringVar(&r.pol.Model, "policy-model", "", "policy model name")
	fl.StringVar(&r.pol.APIKey, "policy-api-key", "", "bearer token sent to the policy server (default: "+envconfig.PolicyAPIKey.Name+")")
	fl.Float64Var(&r.polTemp, "policy-temperature", 1, "policy sampling temperature (sent only when given)")
	fl.IntVar(&r.pol.MaxTokens, "policy-max-tokens", 0, "policy generation budget per turn (0: the server's default)")
	fl.IntVar(&r.opts.GroupSize, "group-size", 8, "forks of each task's root session (G)")
	fl.IntVar(&r.opts.MaxTurns, "episode-turns", 30, "policy turns per episode when a task sets no max_turns")
	fl.IntVar(&r.opts.MaxInFlight, "concurrency", 16, "episodes in flight at once (with --queue: episodes handed out at once)")
	fl.IntVar(&r.opts.BranchAt, "branch-at", 0, "tree groups: run one episode K policy turns from the root, then fork it --group-size times (0: fork at the root)")
	fl.StringVar(&r.remote, "sim", "", "use a running `agentworld serve` at this URL instead of the in-process simulator")
	fl.StringVar(&r.remoteKey, "sim-api-key", "", "bearer token for --sim (default: "+envconfig.APIKey.Name+")")
	fl.DurationVar(&r.stepTimeout, "step-timeout", rollout.DefaultStepTimeout, "with --sim, how long one request to the server (a step, a fork) may take before it fails; 0: no limit")
	fl.BoolVar(&r.curriculum, "curriculum", false, "run only tasks whose pass rate over earlier runs (--pass-history) is strictly between 0 and 1, and tasks not tried yet")
	fl.StringVar(&r.histPath, "pass-history", "", "per-task pass counts of every run, appended after each (default: "+rollout.HistoryFile+" beside --out)")
	usesEnv(cmd, envconfig.APIKey, envconfig.PolicyAPIKey)
}

// tasks loads --tasks. A world library's tasks run in its worlds, which
// the in-process simulator then loads unless told otherwise (--worlds is
// set to it, so a queue's workers load them too).
func (r *rolloutFlags) tasks(cmd *cobra.Command) ([]rollout.Task, error) {
	if !library.IsLibrary(r.tasksPath) {
		tasks, err := rollout.LoadTasks(r.tasksPath)
		if err != nil {
			return nil, flagErr("tasks", err)
		}
		return tasks, nil
	}
	// a generated library: every task, each in the world of its own that
	// carries its check
	tasks, err := libraryTasks(r.tasksPath)
	if err != nil {
		return nil, flagErr("tasks", err)
	}
	if r.remote == "" && r.f.cfg.WorldsDir == "" {
		dir, err := filepath.Abs(r.tasksPath)
		if err != nil {
			return nil, flagErr("tasks", err)
		}
		if err := cmd.Flags().Set("worlds", dir); err != nil {
			return nil, err
		}
	}
	return tasks, nil
}

// checkPolicy refuses a command line that names no policy.
func (r *rolloutFlags) checkPolicy() error {
	if r.pol.URL == "" {
		return flagErr("policy-url", errors.New("required"))
	}
	if r.pol.Model == "" {
		return flagErr("policy-model", errors.New("required"))
	}
	return nil
}

// options checks the policy flags and returns the run's options, but for
// its progress writer, simulator and queue.
func (r *rolloutFlags) options(cmd *cobra.Command) (*rollout.Options, error) {
	if err := r.checkPolicy(); err != nil {
		return nil, err
	}
	if cmd.Flags().Changed("policy-temperature") {
		r.pol.Temperature = &r.polTemp
	}
	if r.pol.APIKey == "" {
		r.pol.APIKey = envconfig.PolicyAPIKey.Value()
	}
	o := r.opts
	o.Policy = &r.pol
	o.Logger = logger(cmd)
	if r.remote == "" {
		o.LWMModel = lwmName(r.f.cfg.Model, r.f.cfg.ModelName)
	}
	return &o, nil
}

// simulator opens what the episodes run against: the in-process
// simulator, or with --sim a running server; the caller calls closeSim.
func (r *rolloutFlags) simulator(cmd *cobra.Command, o *rollout.Options) (s rollout.Simulator, closeSim func(), err error) {
	cl, a, err := r.f.openSim(cmd, r.remote, r.remoteKey)
	if err != nil {
		return nil, nil, err
	}
	if a != nil {
		return rollout.Embedded{M: a.Manager}, func() { _ = closeApp(a) }, nil
	}
	timeout := r.stepTimeout
	if timeout == 0 {
		timeout = -1 // the flag's "no limit"
	}
	return rollout.Remote(cl, o.MaxInFlight, timeout), func() {}, nil
}

// openQueue opens the run's job on the queue: its id follows from the
// output directory and the settings pinned there, so a coordinator
// restarted after a kill finds it again.
func (r *rolloutFlags) openQueue(cmd *cobra.Command, q *queueFlags) (*workqueue.Coordinator, error) {
	out, err := filepath.Abs(r.out)
	if err != nil {
		return nil, flagErr("out", err)
	}
	args, secret := jobFlags(cmd, rolloutCoordinatorFlags...)
	if len(secret) > 0 {
		logger(cmd).Warn("workers do not get secrets through the queue: they read their keys from their own environment", "flags", secret)
	}
	return q.open(cmd, "rollout", args, []byte(out))
}

// countsByName lists counts by name, in name order.
func countsByName[N int | int64](m map[string]N) string {
	names := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}

func newRolloutWorkerCmd() *cobra.Command {
	var w workerFlags
	cmd := &cobra.Command{
		Use:   "worker --queue nats://HOST:4222",
		Short: "Run the episodes of every \"rollout --queue\" job on the queue",
		Long: `Serve the work queue of every "agentworld rollout --queue" run on the
NATS server(s) at --queue until interrupted: take episodes, run each with
its run's settings (the coordinator's command line, so the policy, world
model and worlds it names must be reachable from here, and paths must
exist here), and store its row for the coordinator. An episode whose row
is stored is never run again; one whose worker dies is handed to another
after the queue's ack wait. API keys come from this process's
environment (` + envconfig.PolicyAPIKey.Name + `, ` + envconfig.ModelAPIKey.Name + `, ...).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return w.work(cmd, "rollout", startRolloutJob(cmd))
		},
	}
	w.register(cmd, "episodes")
	usesEnv(cmd, envconfig.APIKey, envconfig.PolicyAPIKey, envconfig.ModelAPIKey)
	return cmd
}

// startRolloutJob prepares a worker for a rollout job: the rollout
// command's flags as the coordinator gave them, the simulator they name
// (closed when the job ends) and the policy.
func startRolloutJob(parent *cobra.Command) workqueue.Start {
	return func(ctx context.Context, job workqueue.Job) (workqueue.Process, error) {
		var r rolloutFlags
		cmd, err := jobCommand(ctx, parent, job, r.register)
		if err != nil {
			return nil, err
		}
		o, err := r.options(cmd)
		if err != nil {
			return nil, err
		}
		// An item holds one episode, or a tree group's members, which
		// run at once.
		o.MaxInFlight = max(o.GroupSize, 1)
		s, closeSim, err := r.simulator(cmd, o)
		if err != nil {
			return nil, err
		}
		context.AfterFunc(ctx, closeSim)
		return rollout.Worker(s, o), nil
	}
}

// libraryTasks lists a library's tasks as rollout tasks: each runs in the
// task's own world (named by its id), whose success rule is its check.
func libraryTasks(dir string) ([]rollout.Task, error) {
	lib, err := library.Open(dir)
	if err != nil {
		return nil, err
	}
	var tasks []rollout.Task
	seen := map[string]bool{}
	err = lib.Tasks(library.Filter{}, func(t *library.TaskEntry, _ string) error {
		if seen[t.ID] { // stored twice by a generator rerun after a kill
			return nil
		}
		seen[t.ID] = true
		tasks = append(tasks, rollout.Task{ID: t.ID, World: t.ID, Instruction: t.Instruction, MaxTurns: t.MaxTurns})
		return nil
	})
	if err == nil && len(tasks) == 0 {
		err = fmt.Errorf("%s: no tasks", dir)
	}
	return tasks, err
}

// lwmName names the world model in rows whose steps report none.
func lwmName(model, name string) string {
	switch {
	case model == "":
		return "replay:embedded"
	case strings.HasPrefix(model, "replay:"):
		return "replay"
	case name != "":
		return name
	}
	return model
}
