package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/rollout"
)

func newRolloutCmd() *cobra.Command {
	var (
		f                 simFlags
		tasksPath, out    string
		remote, remoteKey string
		pol               rollout.Policy
		polTemp           float64
		opts              rollout.Options
		stepTimeout       time.Duration
		curriculum        bool
		histPath          string
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
bundled worlds); with --sim it uses a running serve's session API.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tasksPath == "" {
				return flagErr("tasks", errors.New("required"))
			}
			if out == "" {
				return flagErr("out", errors.New("required"))
			}
			if pol.URL == "" {
				return flagErr("policy-url", errors.New("required"))
			}
			if pol.Model == "" {
				return flagErr("policy-model", errors.New("required"))
			}
			var tasks []rollout.Task
			var err error
			if library.IsLibrary(tasksPath) {
				// a generated library: every task, each in the world of its
				// own that carries its check; the in-process simulator
				// loads the library's worlds unless told otherwise
				if tasks, err = libraryTasks(tasksPath); err != nil {
					return flagErr("tasks", err)
				}
				if remote == "" && f.cfg.WorldsDir == "" {
					f.cfg.WorldsDir = tasksPath
				}
			} else if tasks, err = rollout.LoadTasks(tasksPath); err != nil {
				return flagErr("tasks", err)
			}
			if histPath == "" {
				histPath = rollout.DefaultHistoryPath(out)
			}
			if curriculum {
				hist, err := rollout.ReadHistory(histPath)
				if err != nil {
					return flagErr("pass-history", err)
				}
				var cs rollout.CurriculumStats
				tasks, cs = rollout.Curriculum(tasks, hist)
				fmt.Fprintf(cmd.ErrOrStderr(), "curriculum (%s): %d tasks with a pass rate strictly between 0 and 1, %d not tried yet; left out %d always failed, %d always passed\n",
					histPath, cs.Kept, cs.Unseen, cs.AlwaysFailed, cs.AlwaysPassed)
				if len(tasks) == 0 {
					return flagErr("curriculum", errors.New("no task left: every task always passed or always failed"))
				}
			}
			if cmd.Flags().Changed("policy-temperature") {
				pol.Temperature = &polTemp
			}
			opts.Policy = &pol
			opts.Progress = cmd.ErrOrStderr()
			opts.Logger = logger(cmd)
			var s rollout.Simulator
			cl, a, err := f.openSim(cmd, remote, remoteKey)
			if err != nil {
				return err
			}
			if a != nil {
				defer closeApp(a)
				s = rollout.Embedded{M: a.Manager}
				opts.LWMModel = lwmName(f.cfg.Model, f.cfg.ModelName)
			} else {
				if stepTimeout == 0 {
					stepTimeout = -1 // the flag's "no limit"
				}
				s = rollout.Remote(cl, opts.MaxInFlight, stepTimeout)
			}
			res, err := rollout.Run(cmd.Context(), s, tasks, out, &opts)
			if errors.Is(err, rollout.ErrSettingsChanged) {
				return fmt.Errorf("%w (the output directory is --out)", err)
			}
			if res != nil && res.Summary != nil {
				sum := res.Summary
				fmt.Fprintf(cmd.OutOrStdout(), "%d episodes in %d groups: reward mean %.3f, pass@1 %.3f, pass@%d %.3f; %d of %d groups carried signal (%s)\n",
					sum.Episodes, len(sum.Groups), sum.RewardMean, sum.PassAt1, sum.K, sum.PassAtK, sum.SignalGroups, len(sum.Groups), out)
				abs, aerr := filepath.Abs(out)
				if aerr != nil {
					abs = out
				}
				if herr := rollout.AppendHistory(histPath, abs, sum); herr != nil {
					err = errors.Join(err, fmt.Errorf("pass history: %w", herr))
				}
			}
			return err
		},
	}
	f.registerInMemory(cmd)
	fl := cmd.Flags()
	fl.StringVar(&tasksPath, "tasks", "", "tasks: a JSONL file or a directory of them")
	fl.StringVar(&out, "out", "", "run directory: episodes.jsonl and summary.json (a rerun resumes)")
	fl.StringVar(&pol.URL, "policy-url", "", "policy server base URL (http://host:8000/v1); {session_id} is replaced by the episode's session id")
	fl.StringVar(&pol.Model, "policy-model", "", "policy model name")
	fl.StringVar(&pol.APIKey, "policy-api-key", "", "bearer token sent to the policy server")
	fl.Float64Var(&polTemp, "policy-temperature", 1, "policy sampling temperature (sent only when given)")
	fl.IntVar(&pol.MaxTokens, "policy-max-tokens", 0, "policy generation budget per turn (0: the server's default)")
	fl.IntVar(&opts.GroupSize, "group-size", 8, "forks of each task's root session (G)")
	fl.IntVar(&opts.MaxTurns, "episode-turns", 30, "policy turns per episode when a task sets no max_turns")
	fl.IntVar(&opts.MaxInFlight, "concurrency", 16, "episodes in flight at once")
	fl.IntVar(&opts.BranchAt, "branch-at", 0, "tree groups: run one episode K policy turns from the root, then fork it --group-size times (0: fork at the root)")
	fl.StringVar(&remote, "sim", "", "use a running `agentworld serve` at this URL instead of the in-process simulator")
	fl.StringVar(&remoteKey, "sim-api-key", "", "bearer token for --sim (default: "+envconfig.APIKey.Name+")")
	fl.DurationVar(&stepTimeout, "step-timeout", rollout.DefaultStepTimeout, "with --sim, how long one request to the server (a step, a fork) may take before it fails; 0: no limit")
	fl.BoolVar(&curriculum, "curriculum", false, "run only tasks whose pass rate over earlier runs (--pass-history) is strictly between 0 and 1, and tasks not tried yet")
	fl.StringVar(&histPath, "pass-history", "", "per-task pass counts of every run, appended after each (default: "+rollout.HistoryFile+" beside --out)")
	usesEnv(cmd, envconfig.APIKey)
	return cmd
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
