package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/rejection"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// sampleFlags are data sample's settings. A queue's workers rebuild them
// from the coordinator's command line (jobFlags), so they request and
// score beams as the coordinator would have.
type sampleFlags struct {
	rf                rewardFlags
	teacher           transportFlags
	o                 rejection.Options
	out, policyFile   string
	thinking          string
	target            string
	temperature, topP float64
	pol               rejection.Policy
	asJSON            bool
	progressEvery     time.Duration
}

// sampleCoordinatorFlags are the flags of a run that its queue's workers
// do not take: the coordinator's output and queue, how it reports, what
// it keeps (the policy file: its flags still travel, to be checked), and
// the bound of its own process.
var sampleCoordinatorFlags = []string{"out", "concurrency", "progress-interval", "json", "keep-policy", "queue", "ack-wait"}

// newDataSampleCmd wires `agentworld data sample`, rejection sampling.
func newDataSampleCmd() *cobra.Command {
	var (
		sf sampleFlags
		q  queueFlags
	)
	cmd := &cobra.Command{
		Use:   "sample SAMPLES.jsonl... --out DIR --teacher-url URL --teacher-model NAME [--judge-url URL --judge-model NAME]",
		Short: "Rejection sampling: N teacher beams per expanded sample, scored by the hybrid reward; SFT targets with reasoning, candidates, preference pairs",
		Long: `For every expanded sample (agentworld data expand), ask the teacher world
model for --beams generations, score each against the real observation with
the hybrid reward (the reward command's flags; without --judge-url the rubric
comes from the offline rules judge, and the summary says so), and keep beams
by the policy (--min-reward, --top-k, --min-margin, --require-rule-pass, or
--keep-policy FILE.yaml).

Writes into --out:
  sft.jsonl         kept beams as chat SFT lines; the target is the teacher's
                    reasoning plus its tagged observation (--thinking inline:
                    <think>…</think> in content, as ms-swift and LLaMA-Factory
                    read it; reasoning_content: the message field the Qwen3
                    chat template TRL applies reads)
  candidates.jsonl  every beam with its reward, rank and decision; ids are
                    {trajectory}-{turn}-{beam}
  pairs.jsonl       best vs worst beam per sample: TRL DPO conversational
                    (prompt, chosen, rejected) plus OpenRLHF's chosen_reward
                    and rejected_reward
  summary.json      input → kept counts, per-domain keep rates, reward
                    histograms
Every teacher answer is journaled with its request hash as it arrives, and
every beam once scored. Rerun the same command after a crash or kill: no
answered beam is requested again and the outputs end byte-identical to an
uninterrupted run.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := need(map[string]string{"--out": sf.out}); err != nil {
				return err
			}
			o, err := sf.options(cmd)
			if err != nil {
				return err
			}
			o.Progress, o.ProgressInterval = cmd.ErrOrStderr(), sf.progressEvery
			var coord *workqueue.Coordinator
			if q.url != "" {
				if coord, err = sf.openQueue(cmd, &q, args); err != nil {
					return err
				}
				o.Queue = coord
			}
			res, err := rejection.Run(cmd.Context(), args, sf.out, o)
			if coord != nil {
				err = errors.Join(err, q.close(cmd, coord, res != nil))
			}
			if errors.Is(err, rejection.ErrSettingsChanged) {
				return fmt.Errorf("%w (the output directory is --out)", err)
			}
			if res != nil && len(res.Workers) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "beams by worker: %s\n", countsByName(res.Workers))
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d samples resumed, %d scored beams and %d teacher answers reused from the journal, %d teacher requests, in %s\n",
				res.Resumed, res.Journaled, res.Reused, res.Requests, res.Elapsed.Round(time.Millisecond))
			return writeResult(cmd, sf.asJSON, res.Summary, res.Summary.WriteText)
		},
	}
	sf.register(cmd)
	q.register(cmd, "beam")
	cmd.AddCommand(newDataSampleWorkerCmd())
	return cmd
}

func (sf *sampleFlags) register(cmd *cobra.Command) {
	sf.pol = rejection.DefaultPolicy
	sf.rf.register(cmd)
	sf.teacher.register(cmd, "teacher-", "teacher world model", envconfig.ModelAPIKey, envconfig.OpenAIAPIKey)
	fl := cmd.Flags()
	fl.StringVar(&sf.teacher.model, "teacher-model", "", "model name of the teacher (with --teacher-url)")
	fl.StringVarP(&sf.out, "out", "o", "", "output directory (resumes what it holds)")
	fl.IntVar(&sf.o.Beams, "beams", rejection.DefaultBeams, "generations per sample")
	fl.IntVar(&sf.o.Concurrency, "concurrency", rejection.DefaultConcurrency, "teacher requests in flight at most (with --queue: beams handed out at once)")
	fl.IntVar(&sf.o.MaxTokens, "max-tokens", rejection.DefaultMaxTokens, "teacher token budget (negative: none sent)")
	fl.Float64Var(&sf.temperature, "temperature", rejection.DefaultTemperature, "teacher sampling temperature (negative: none sent)")
	fl.Float64Var(&sf.topP, "top-p", -1, "teacher top_p (negative: none sent)")
	fl.Int64Var(&sf.o.Seed, "beam-seed", 0, "beam b is requested with seed beam-seed+b")
	fl.Float64Var(&sf.pol.MinReward, "min-reward", rejection.DefaultPolicy.MinReward, "lowest reward in [0, 25] of a kept beam")
	fl.IntVar(&sf.pol.TopK, "top-k", rejection.DefaultPolicy.TopK, "beams kept per sample at most, best first")
	fl.Float64Var(&sf.pol.MinMargin, "min-margin", rejection.DefaultPolicy.MinMargin, "least reward gap between a preference pair's chosen and rejected beam")
	fl.BoolVar(&sf.pol.RequireRulePass, "require-rule-pass", false, "keep only beams whose rule verifier passed")
	fl.StringVar(&sf.policyFile, "keep-policy", "", "YAML file {min_reward, top_k, min_margin, require_rule_pass}; flags given win")
	fl.StringVar(&sf.target, "target", string(rejection.TargetTeacher), `the SFT target's answer: "teacher" (the kept beam's prediction, which may be factually wrong) or "real" (the kept beam's reasoning, then the real observation); the summary counts kept predictions that differ from the real observation`)
	fl.StringVar(&sf.thinking, "thinking", string(rejection.ThinkInline), `where targets carry the reasoning: "inline" (<think>…</think> in content) or "reasoning_content"`)
	fl.DurationVar(&sf.progressEvery, "progress-interval", 10*time.Second, "how often the progress line is printed on stderr")
	fl.BoolVar(&sf.asJSON, "json", false, "print the summary as JSON")
}

// options checks the flags and returns the run's options, but for its
// progress writer and queue.
func (sf *sampleFlags) options(cmd *cobra.Command) (*rejection.Options, error) {
	if err := need(map[string]string{"--teacher-url": sf.teacher.url, "--teacher-model": sf.teacher.model}); err != nil {
		return nil, err
	}
	pol := sf.pol
	if sf.policyFile != "" {
		p, err := rejection.LoadPolicy(sf.policyFile)
		if err != nil {
			return nil, err
		}
		// Flags given on the command line win over the file.
		fl := cmd.Flags()
		if fl.Changed("min-reward") {
			p.MinReward = pol.MinReward
		}
		if fl.Changed("top-k") {
			p.TopK = pol.TopK
		}
		if fl.Changed("min-margin") {
			p.MinMargin = pol.MinMargin
		}
		if fl.Changed("require-rule-pass") {
			p.RequireRulePass = pol.RequireRulePass
		}
		pol = p
	}
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	th, err := rejection.ParseThinking(sf.thinking)
	if err != nil {
		return nil, flagErr("thinking", err)
	}
	s, err := sf.rf.scorer(cmd, nil)
	if err != nil {
		return nil, err
	}
	tg, err := rejection.ParseTarget(sf.target)
	if err != nil {
		return nil, flagErr("target", err)
	}
	o := sf.o
	o.Scorer, o.Policy, o.Thinking, o.Target = s, pol, th, tg
	o.Teacher, o.TeacherModel = sf.teacher.client(cmd), sf.teacher.model
	if sf.temperature >= 0 {
		o.Temperature = &sf.temperature
	}
	if sf.topP >= 0 {
		o.TopP = &sf.topP
	}
	o.Logger = logger(cmd)
	return &o, nil
}

// openQueue opens the run's job on the queue: its id follows from the
// output directory, the inputs and the flags, so a coordinator restarted
// with the same command line after a kill finds it again.
func (sf *sampleFlags) openQueue(cmd *cobra.Command, q *queueFlags, inputs []string) (*workqueue.Coordinator, error) {
	pin := make([][]byte, 0, len(inputs)+1)
	for _, p := range append([]string{sf.out}, inputs...) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		pin = append(pin, []byte(abs))
	}
	args, secret := jobFlags(cmd, sampleCoordinatorFlags...)
	if len(secret) > 0 {
		logger(cmd).Warn("workers do not get secrets through the queue: they read their keys from their own environment", "flags", secret)
	}
	return q.open(cmd, "sample", args, pin...)
}

func newDataSampleWorkerCmd() *cobra.Command {
	var w workerFlags
	cmd := &cobra.Command{
		Use:   "worker --queue nats://HOST:4222",
		Short: "Generate and score the beams of every \"data sample --queue\" job on the queue",
		Long: `Serve the work queue of every "agentworld data sample --queue" run on the
NATS server(s) at --queue until interrupted: take beams, request each from
the teacher and score it with the run's settings (the coordinator's
command line, so the teacher and judge it names must be reachable from
here, and files it names must exist here), and store it for the
coordinator. A beam that is stored is never requested again; one whose
worker dies is handed to another after the queue's ack wait. API keys come
from this process's environment (` + envconfig.ModelAPIKey.Name + `, ` + envconfig.JudgeAPIKey.Name + `, ` + envconfig.OpenAIAPIKey.Name + `).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return w.work(cmd, "sample", startSampleJob(cmd, &w))
		},
	}
	w.register(cmd, "beams")
	usesEnv(cmd, envconfig.ModelAPIKey, envconfig.JudgeAPIKey, envconfig.OpenAIAPIKey)
	return cmd
}

// startSampleJob prepares a worker for a data sample job: the command's
// flags as the coordinator gave them, its teacher and scorer.
func startSampleJob(parent *cobra.Command, w *workerFlags) workqueue.Start {
	return func(ctx context.Context, job workqueue.Job) (workqueue.Process, error) {
		var sf sampleFlags
		cmd, err := jobCommand(ctx, parent, job, sf.register)
		if err != nil {
			return nil, err
		}
		o, err := sf.options(cmd)
		if err != nil {
			return nil, err
		}
		// The worker's slots bound its beams; each needs one teacher
		// request at a time.
		o.Concurrency = w.concurrency
		return rejection.Worker(o)
	}
}
