package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/realenv"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/verify"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// verifyFlags are the flags of agentworld verify.
type verifyFlags struct {
	world, traj, task, out, record string
	closedLoop                     bool
	model                          transportFlags
	maxTokens, concurrency         int
}

func newVerifyCmd() *cobra.Command {
	var f verifyFlags
	cmd := &cobra.Command{
		Use:   "verify --world SPEC --trajectory FILE | --closed-loop --task DIR --trajectory FILE",
		Short: "Measure simulator-versus-real divergence: teacher-forced replay through a world model, or closed-loop replay in the real terminal",
		Long: `Teacher forcing (default): every turn of a recorded real trajectory is predicted
by the world model from the real history before it; the report gives per-turn
divergence (exact match of deterministic content, token similarity, domain rule
checks) and a summary.

--closed-loop: the actions of an episode an agent produced against the simulator
are replayed in the real terminal of --task; the report says whether the task's
check passes and how each simulated observation differs from the real one.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.traj == "" {
				return errors.New("--trajectory is required")
			}
			ctx := cmd.Context()
			trajs, err := realenv.ReadTrajectories(f.traj)
			if err != nil {
				return err
			}
			if len(trajs) == 0 {
				return fmt.Errorf("%s: no trajectory", f.traj)
			}
			var rep *verify.VerifyReport
			if f.closedLoop {
				if f.task == "" {
					return errors.New("--closed-loop needs --task")
				}
				task, err := realenv.LoadTask(f.task)
				if err != nil {
					return err
				}
				rep, err = verify.ClosedLoop(ctx, task, trajs[0], &realenv.RunOptions{Record: &realenv.RecordOptions{Dir: f.record}, Logger: logger(cmd)})
				if err != nil {
					return err
				}
			} else {
				if f.world == "" {
					return errors.New("teacher forcing needs --world")
				}
				if f.model.url == "" {
					return errors.New("teacher forcing needs --model-url (the world model's endpoint)")
				}
				spec, err := world.Load(f.world)
				if err != nil {
					return err
				}
				// The built-in baseline the flag's help names needs no server:
				// each turn predicts the previous real observation.
				var c worldmodel.Completer = bench.CopyBaseline{}
				if f.model.url != bench.CopyBaselineURL {
					c = f.model.client(cmd)
				}
				p, err := realenv.NewSimPredictor(sim.NewModelBackend(c, &sim.ModelOptions{Model: f.model.model, MaxTokens: f.maxTokens}), spec)
				if err != nil {
					return err
				}
				rep, err = verify.TeacherForced(ctx, trajs[0], p, &verify.VerifyOptions{Concurrency: f.concurrency, Progress: cmd.ErrOrStderr()})
				if err != nil {
					return err
				}
			}
			b, err := trajectory.Marshal(rep)
			if err != nil {
				return err
			}
			if f.out != "" {
				if err := atomicfile.WriteFile(f.out, append(b, '\n'), nil); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
			}
			s := rep.Summary
			fmt.Fprintf(cmd.ErrOrStderr(), "%s %s: %d turns, exact %d (%.1f%%), mean similarity %.3f, rules passed %.1f%%, simulator errors %d\n",
				rep.Mode, rep.Trajectory, s.Turns, s.Exact, 100*s.ExactRate, s.MeanSimilarity, 100*s.RulesPassRate, s.Errors)
			if s.Turns > 0 && s.Errors == s.Turns {
				return fmt.Errorf("%s: the simulator answered none of the %d turns (see each turn's error in the report); nothing was compared", rep.Trajectory, s.Turns)
			}
			if rep.Check != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "task %s check: passed=%v (exit %d)\n", rep.Task, rep.Check.Passed, rep.Check.ExitCode)
				if !rep.Check.Passed {
					return fmt.Errorf("task %s: the real check fails for this episode (exit %d)", rep.Task, rep.Check.ExitCode)
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.world, "world", "", "world spec (YAML/JSON) the simulator runs (teacher forcing)")
	fl.StringVar(&f.traj, "trajectory", "", "trajectory file (.json or .jsonl; the first trajectory is used)")
	fl.BoolVar(&f.closedLoop, "closed-loop", false, "replay the trajectory's actions in the real terminal of --task")
	fl.StringVar(&f.task, "task", "", "task directory (closed loop)")
	fl.StringVar(&f.record, "record", "", "directory to record the closed-loop real run in")
	fl.StringVar(&f.out, "out", "", "write the report here instead of stdout")
	fl.IntVar(&f.concurrency, "concurrency", 4, "turns predicted at once (teacher forcing)")
	f.model.register(cmd, "model-", "world model", envconfig.ModelAPIKey, envconfig.OpenAIAPIKey)
	fl.StringVar(&f.model.model, "model", "", "model name of the world model (teacher forcing)")
	fl.IntVar(&f.maxTokens, "max-tokens", 32768, "generation budget per predicted turn")
	return cmd
}
