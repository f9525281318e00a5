package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/rejection"
)

// newDataSampleCmd wires `agentworld data sample`, rejection sampling.
func newDataSampleCmd() *cobra.Command {
	var (
		rf                rewardFlags
		teacher           transportFlags
		o                 rejection.Options
		out, policyFile   string
		thinking          string
		target            string
		temperature, topP float64
		pol               = rejection.DefaultPolicy
		asJSON            bool
		progressEvery     time.Duration
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
			if err := need(map[string]string{"--out": out, "--teacher-url": teacher.url, "--teacher-model": teacher.model}); err != nil {
				return err
			}
			if policyFile != "" {
				p, err := rejection.LoadPolicy(policyFile)
				if err != nil {
					return err
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
				return err
			}
			th, err := rejection.ParseThinking(thinking)
			if err != nil {
				return flagErr("thinking", err)
			}
			s, err := rf.scorer(cmd, nil)
			if err != nil {
				return err
			}
			tg, err := rejection.ParseTarget(target)
			if err != nil {
				return flagErr("target", err)
			}
			o.Scorer, o.Policy, o.Thinking, o.Target = s, pol, th, tg
			o.Teacher, o.TeacherModel = teacher.client(cmd), teacher.model
			if temperature >= 0 {
				o.Temperature = &temperature
			}
			if topP >= 0 {
				o.TopP = &topP
			}
			o.Progress, o.ProgressInterval, o.Logger = cmd.ErrOrStderr(), progressEvery, logger(cmd)
			res, err := rejection.Run(cmd.Context(), args, out, &o)
			if errors.Is(err, rejection.ErrSettingsChanged) {
				return fmt.Errorf("%w (the output directory is --out)", err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d samples resumed, %d scored beams and %d teacher answers reused from the journal, %d teacher requests, in %s\n",
				res.Resumed, res.Journaled, res.Reused, res.Requests, res.Elapsed.Round(time.Millisecond))
			return writeResult(cmd, asJSON, res.Summary, res.Summary.WriteText)
		},
	}
	rf.register(cmd)
	teacher.register(cmd, "teacher-", "teacher world model", envconfig.ModelAPIKey, envconfig.OpenAIAPIKey)
	fl := cmd.Flags()
	fl.StringVar(&teacher.model, "teacher-model", "", "model name of the teacher (with --teacher-url)")
	fl.StringVarP(&out, "out", "o", "", "output directory (resumes what it holds)")
	fl.IntVar(&o.Beams, "beams", rejection.DefaultBeams, "generations per sample")
	fl.IntVar(&o.Concurrency, "concurrency", rejection.DefaultConcurrency, "teacher requests in flight at most")
	fl.IntVar(&o.MaxTokens, "max-tokens", rejection.DefaultMaxTokens, "teacher token budget (negative: none sent)")
	fl.Float64Var(&temperature, "temperature", rejection.DefaultTemperature, "teacher sampling temperature (negative: none sent)")
	fl.Float64Var(&topP, "top-p", -1, "teacher top_p (negative: none sent)")
	fl.Int64Var(&o.Seed, "beam-seed", 0, "beam b is requested with seed beam-seed+b")
	fl.Float64Var(&pol.MinReward, "min-reward", rejection.DefaultPolicy.MinReward, "lowest reward in [0, 25] of a kept beam")
	fl.IntVar(&pol.TopK, "top-k", rejection.DefaultPolicy.TopK, "beams kept per sample at most, best first")
	fl.Float64Var(&pol.MinMargin, "min-margin", rejection.DefaultPolicy.MinMargin, "least reward gap between a preference pair's chosen and rejected beam")
	fl.BoolVar(&pol.RequireRulePass, "require-rule-pass", false, "keep only beams whose rule verifier passed")
	fl.StringVar(&policyFile, "keep-policy", "", "YAML file {min_reward, top_k, min_margin, require_rule_pass}; flags given win")
	fl.StringVar(&target, "target", string(rejection.TargetTeacher), `the SFT target's answer: "teacher" (the kept beam's prediction, which may be factually wrong) or "real" (the kept beam's reasoning, then the real observation); the summary counts kept predictions that differ from the real observation`)
	fl.StringVar(&thinking, "thinking", string(rejection.ThinkInline), `where targets carry the reasoning: "inline" (<think>…</think> in content) or "reasoning_content"`)
	fl.DurationVar(&progressEvery, "progress-interval", 10*time.Second, "how often the progress line is printed on stderr")
	fl.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}
