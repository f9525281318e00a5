package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/mcpworld"
	"github.com/agentworld/agentworld/internal/realenv"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
)

func newRealenvCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "realenv",
		Short: "Real environments: a sandboxed terminal and MCP servers, recorded as trajectories",
	}
	cmd.AddCommand(newRealTerminalCmd(), newRealMCPCmd(), newRealTaskCmd(), newRealExportCmd())
	return cmd
}

// readActionsFlag reads actions from a file, or stdin for "-".
func readActionsFlag(path string, d domain.Domain) ([]string, error) {
	if path == "" || path == "-" {
		return realenv.ReadActions(os.Stdin, "stdin", d)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return realenv.ReadActions(f, path, d)
}

// driveRecorded performs the actions read from the actions flag in env,
// prints every screen, and records the session (into dir when given).
func driveRecorded(cmd *cobra.Command, env realenv.Env, actions, id, dir string) error {
	acts, err := readActionsFlag(actions, env.Domain())
	if err != nil {
		return err
	}
	rec := realenv.NewRecorded(env, &realenv.RecordOptions{ID: id, Dir: dir, Logger: logger(cmd)})
	defer rec.Close()
	_, err = realenv.Drive(cmd.Context(), rec, acts, cmd.OutOrStdout())
	if rec.Path() != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "recorded %s\n", rec.Path())
	}
	return err
}

func newRealTerminalCmd() *cobra.Command {
	var seed, setupFile, actions, record, id string
	var width, height int
	cmd := &cobra.Command{
		Use:   "terminal",
		Short: "Run a sandboxed bash terminal, perform actions (one per line) and record the session",
		Long: `Starts bash in tmux inside a bubblewrap sandbox (no network, read-only system,
private work dir at /app), performs the actions read from --actions (or stdin),
one per line, prints every screen, and records the session as a trajectory.
A line that is not a JSON array of {keystrokes, duration} is typed as a command.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := &realenv.TerminalOptions{Seed: seed, Width: width, Height: height, Logger: logger(cmd)}
			if setupFile != "" {
				b, err := os.ReadFile(setupFile)
				if err != nil {
					return err
				}
				opts.Setup = string(b)
			}
			return driveRecorded(cmd, realenv.NewTerminal(opts), actions, id, record)
		},
	}
	f := cmd.Flags()
	f.StringVar(&seed, "seed", "", "directory copied into the work dir before the shell starts")
	f.StringVar(&setupFile, "setup", "", "bash script run in the sandbox before the first screen")
	f.StringVar(&actions, "actions", "-", "file of actions, one per line (- for stdin)")
	f.StringVar(&record, "record", "", "directory to write the recorded trajectory to (<id>.json)")
	f.StringVar(&id, "id", "", "session id (default random)")
	f.IntVar(&width, "width", 160, "pane width")
	f.IntVar(&height, "height", 40, "pane height")
	return cmd
}

func newRealMCPCmd() *cobra.Command {
	var actions, record, id string
	var env []string
	cmd := &cobra.Command{
		Use:   "mcp [flags] -- SERVER-COMMAND [ARGS...]",
		Short: "Launch an MCP server over stdio, call its tools (one JSON call per line) and record the session",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := realenv.NewMCP(&realenv.MCPOptions{Command: args, Env: env, Logger: logger(cmd)})
			if err != nil {
				return err
			}
			return driveRecorded(cmd, m, actions, id, record)
		},
	}
	f := cmd.Flags()
	f.StringVar(&actions, "actions", "-", `file of tool calls, one {"name", "arguments"} per line (- for stdin)`)
	f.StringVar(&record, "record", "", "directory to write the recorded trajectory to (<id>.json)")
	f.StringVar(&id, "id", "", "session id (default random)")
	f.StringArrayVar(&env, "env", nil, "KEY=VALUE added to the server's environment (repeatable)")
	return cmd
}

func newRealTaskCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "task", Short: "Terminal tasks: setup, instruction, check, oracle"}
	var actions, traj, record string
	var oracle bool
	run := &cobra.Command{
		Use:   "run TASK-DIR",
		Short: "Run a task in the real terminal with its oracle, an action file or a trajectory's actions, then its check",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			task, err := realenv.LoadTask(args[0])
			if err != nil {
				return err
			}
			acts, script, err := taskActions(task, oracle, actions, traj)
			if err != nil {
				return err
			}
			res, err := realenv.RunTask(ctx, task, acts, &realenv.RunOptions{Record: &realenv.RecordOptions{Dir: record}, Script: script, Logger: logger(cmd)})
			if err != nil {
				return err
			}
			return printCheck(cmd, task.Name, res)
		},
	}
	run.Flags().BoolVar(&oracle, "oracle", false, "run the task's oracle solution")
	run.Flags().StringVar(&actions, "actions", "", "file of actions, one per line")
	run.Flags().StringVar(&traj, "trajectory", "", "replay the actions of a recorded trajectory (.json or .jsonl, first one)")
	run.Flags().StringVar(&record, "record", "", "directory to write the recorded trajectory to")

	oracles := &cobra.Command{
		Use:   "oracles TASKS-DIR",
		Short: "Run every task's oracle and report whether each passes its check",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			tasks, err := realenv.LoadTasks(args[0])
			if err != nil {
				return err
			}
			failed := 0
			for _, t := range tasks {
				acts, script, err := taskActions(t, true, "", "")
				if err != nil {
					return err
				}
				res, err := realenv.RunTask(ctx, t, acts, &realenv.RunOptions{Script: script, Logger: logger(cmd)})
				if err != nil {
					return err
				}
				if perr := printCheck(cmd, t.Name, res); perr != nil {
					failed++
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d oracles fail their check", failed, len(tasks))
			}
			return nil
		},
	}
	cmd.AddCommand(run, oracles)
	return cmd
}

// taskActions picks the actions (and script) a task run replays.
func taskActions(t *realenv.Task, oracle bool, actions, traj string) ([]string, string, error) {
	switch {
	case oracle:
		if t.Oracle == nil {
			return nil, "", fmt.Errorf("task %s has no oracle", t.Name)
		}
		acts, err := t.Oracle.ActionStrings()
		return acts, t.Oracle.Script, err
	case traj != "":
		acts, err := realenv.TrajectoryActions(traj)
		return acts, "", err
	case actions != "":
		acts, err := readActionsFlag(actions, domain.Terminal)
		return acts, "", err
	}
	return nil, "", errors.New("give --oracle, --actions or --trajectory")
}

func printCheck(cmd *cobra.Command, name string, res *realenv.TaskRun) error {
	out := map[string]any{"task": name, "steps": res.Steps, "check": res.Check}
	if p := res.Recording.Path(); p != "" {
		out["recording"] = p
	}
	b, _ := trajectory.Marshal(out)
	fmt.Fprintln(cmd.OutOrStdout(), string(b))
	if !res.Check.Passed {
		return fmt.Errorf("task %s: check failed (exit %d)", name, res.Check.ExitCode)
	}
	return nil
}

func newRealExportCmd() *cobra.Command {
	var out string
	var firstID int64
	cmd := &cobra.Command{
		Use:   "export --out DIR RECORDING...",
		Short: "Turn recorded trajectories into AgentWorldBench records ({domain}_test.jsonl) for agentworld bench",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			trajs, err := realenv.ReadTrajectories(args...)
			if err != nil {
				return err
			}
			stats, err := realenv.ExportRecords(trajs, out, &realenv.ExportOptions{FirstID: firstID})
			if err != nil {
				return err
			}
			for _, s := range stats.Skipped {
				fmt.Fprintf(cmd.ErrOrStderr(), "skipped %s\n", s)
			}
			b, _ := json.MarshalIndent(stats, "", "  ")
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output directory (required)")
	cmd.Flags().Int64Var(&firstID, "first-id", 1, "id of the first exported trajectory")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// realFlags let serve (and play) offer real environments: terminal tasks
// and MCP servers the operator allows, by name.
type realFlags struct {
	tasksDir string
	mcp      []string
}

func (r *realFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&r.tasksDir, "real-tasks", "", "directory of terminal tasks served as worlds on backend real:terminal (and for shadow: real); without it no real terminal is offered")
	fl.StringArrayVar(&r.mcp, "real-mcp", nil, "NAME=COMMAND ARGS...: an MCP server sessions may launch on backend real:mcp (repeatable; a world of that name uses it); without it no real MCP server is offered")
}

// apply hooks the real backends into the app config and returns the
// worlds to add once the manager exists: one per task, and one per MCP
// server named after it (its tools listed from the server now, on backend
// real:mcp), so `--real-mcp NAME=…` gives sessions a world_id NAME. A
// loaded world of that name keeps its spec (see addRealWorlds).
func (r *realFlags) apply(cmd *cobra.Command, cfg *app.Config) ([]*world.Spec, error) {
	opts := &realenv.BackendOptions{Logger: logger(cmd), MCPServers: map[string]realenv.MCPServer{}}
	var worlds []*world.Spec
	if r.tasksDir != "" {
		tasks, err := realenv.LoadTasks(r.tasksDir)
		if err != nil {
			return nil, fmt.Errorf("--real-tasks: %w", err)
		}
		opts.Tasks = map[string]*realenv.Task{}
		for _, t := range tasks {
			opts.Tasks[t.Name] = t
			worlds = append(worlds, realenv.TaskWorld(t))
		}
	}
	for _, m := range r.mcp {
		name, command, ok := strings.Cut(m, "=")
		if !ok || name == "" || len(strings.Fields(command)) == 0 {
			return nil, fmt.Errorf("--real-mcp %q: want NAME=COMMAND ARGS", m)
		}
		opts.MCPServers[name] = realenv.MCPServer{Command: strings.Fields(command)}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		spec, err := mcpworld.Import(ctx, strings.Fields(command), &mcpworld.ImportOptions{Name: name, Stderr: cmd.ErrOrStderr(), Logger: logger(cmd)})
		if err != nil {
			return nil, fmt.Errorf("--real-mcp %s: list the server's tools for its world: %w", name, err)
		}
		spec.Backend = realenv.BackendMCP
		spec.Description = fmt.Sprintf("The real MCP server %s (--real-mcp), on backend %s; its tools were listed at startup.", name, realenv.BackendMCP)
		worlds = append(worlds, spec)
	}
	// Real environments run on this host: each is offered only when its
	// flag is given.
	off := map[string]string{}
	if r.tasksDir == "" {
		off[realenv.BackendTerminal] = "start serve with --real-tasks DIR to offer real terminals"
	}
	if len(r.mcp) == 0 {
		off[realenv.BackendMCP] = "start serve with --real-mcp NAME=COMMAND to offer real MCP servers"
	}
	cfg.Extend = func(b map[string]sim.BackendFactory, simulator string) map[string]sim.BackendFactory {
		o := *opts
		o.Simulator, o.SimulatorName = b[simulator], simulator
		return realenv.Offer(realenv.Backends(&o), simulator, off)
	}
	return worlds, nil
}

// addRealWorlds adds the worlds apply returned to the manager; a world the
// server loaded under an MCP server's name stays as loaded (it names that
// server, and sessions pick backend real:mcp themselves).
func addRealWorlds(m *sim.Manager, worlds []*world.Spec) {
	for _, w := range worlds {
		if _, loaded := m.World(w.Name); loaded && w.Backend == realenv.BackendMCP {
			continue
		}
		m.AddWorld(w)
	}
}
