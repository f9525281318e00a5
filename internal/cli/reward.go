package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/reward"
)

func newRewardCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reward",
		Short: "The hybrid reward of world-model predictions: an HTTP server for RL trainers, offline scoring",
	}
	cmd.AddCommand(newRewardServeCmd(), newRewardScoreCmd())
	return cmd
}

// rewardFlags configure the scorer; serve and score share them.
type rewardFlags struct {
	prompts     string
	tf          transportFlags
	o           reward.Options
	policy      string
	temperature float64
}

func (f *rewardFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	f.tf.register(cmd, "judge-", "rubric judge", envconfig.JudgeAPIKey, envconfig.OpenAIAPIKey)
	fl.StringVar(&f.tf.model, "judge-model", "", "model name of the rubric judge (with --judge-url)")
	fl.StringVar(&f.prompts, "prompts", "", promptsUsage)
	fl.StringVar(&f.o.PolicyModel, "policy-model", "", "model name of the policy under training; a judge of the same family is refused")
	fl.BoolVar(&f.o.AllowSameFamily, "allow-same-family", false, "let a judge of the policy's model family score it")
	fl.Float64Var(&f.o.RubricWeight, "rubric-weight", 0.9, "weight of the rubric component (with --rule-weight, sums to 1)")
	fl.Float64Var(&f.o.RuleWeight, "rule-weight", 0.1, "weight of the rule component (with --rubric-weight, sums to 1)")
	fl.StringVar(&f.o.Mix, "mix", reward.MixWeighted, `how the components mix: "weighted" (a weighted sum) or "sample" (the rule alone for a seeded share of items, the rubric for the rest)`)
	fl.Uint64Var(&f.o.Seed, "seed", 0, "seed of --mix sample's draws")
	fl.StringVar(&f.policy, "on-judge-failure", string(reward.PolicyRules), `when the judge never parses: "rules" (rubric from the offline rules scorer), "zero" (rubric 0) or "drop" (no score); always counted, with a reason`)
	fl.BoolVar(&f.o.RequireTag, "require-tag", false, "score 0 a response without a <predicted_observation> tag (default: the published extraction, which falls back to the cleaned text)")
	fl.IntVar(&f.o.Samples, "judge-samples", 1, "judge samples per item; their spread is reported as a confidence")
	fl.IntVar(&f.o.MaxConcurrency, "judge-concurrency", 16, "judge calls in flight at most")
	fl.IntVar(&f.o.MaxTokens, "judge-max-tokens", 0, "token budget of a judge answer (0: none sent)")
	fl.Float64Var(&f.temperature, "judge-temperature", -1, "judge sampling temperature (negative: none sent)")
}

// scorer builds the scorer; without --judge-url the rubric comes from the
// offline rules scorer, and every result says so.
func (f *rewardFlags) scorer(cmd *cobra.Command, onJudgeCall func(time.Duration, error)) (*reward.Scorer, error) {
	o := f.o
	if err := reward.CheckWeights(o.RubricWeight, o.RuleWeight); err != nil {
		return nil, fmt.Errorf("--rubric-weight %v and --rule-weight %v: each in [0, 1], summing to 1 (the score then stays in [0, 25]); e.g. 0.9 and 0.1", o.RubricWeight, o.RuleWeight)
	}
	o.OnJudgeFailure = reward.Policy(f.policy)
	o.Logger = logger(cmd)
	o.OnJudgeCall = onJudgeCall
	if f.prompts != "" && f.tf.url == "" {
		return nil, errors.New("--prompts is the LLM judge's text; it needs --judge-url (without it the rules scorer judges)")
	}
	p, err := loadJudgePrompts(cmd, f.prompts)
	if err != nil {
		return nil, err
	}
	o.Prompts = p
	if f.temperature >= 0 {
		t := f.temperature
		o.Temperature = &t
	}
	switch {
	case f.tf.url != "" && f.tf.model == "":
		return nil, errors.New("--judge-url needs --judge-model")
	case f.tf.url == "" && f.tf.model != "":
		return nil, errors.New("--judge-model needs --judge-url")
	case f.tf.url != "":
		// One limiter: the scorer's, inside its concurrency bound.
		o.Rate, f.tf.rps = f.tf.rps, 0
		o.Judge = f.tf.client(cmd)
		o.JudgeModel = f.tf.model
	default:
		logger(cmd).Warn("no --judge-url: the rubric component comes from the offline rules scorer (judge \"rules\"), not an LLM judge")
	}
	return reward.New(&o)
}

func newRewardServeCmd() *cobra.Command {
	var (
		f     rewardFlags
		ho    reward.HandlerOptions
		addr  string
		drain time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve [--judge-url URL --judge-model NAME] [--addr HOST:PORT]",
		Short: "Serve the hybrid reward to RL trainers: native batch API, OpenRLHF, slime, NeMo Gym",
		Long: `Serve the hybrid reward over HTTP.

Routes:
  POST /v1/rewards:batch  native: {"items": [{id, data_source, prompt, response, ground_truth, extra_info}]}
                          (prompt: the RL row's chat messages, a chat-templated string, or the action)
  POST /get_reward        OpenRLHF remote reward model (--reward.remote_url http://HOST:PORT/get_reward)
  POST /slime             slime remote_rm (--rm-type remote_rm --rm-url http://HOST:PORT/slime --reward-key score)
  POST /verify            NeMo Gym resources-server verify (with /seed_session, /aggregate_metrics)
  GET  /health, /metrics  liveness; Prometheus metrics

--on-judge-failure drop leaves a failed item without a score, which only
the batch API can say: it needs --batch-only (the trainer routes would
read it as 0).

The judge sees the history and current turn the prompt holds (for verl,
extra_info.messages), exactly as bench judge sees the record.

Scores are in [0, 25] (rubric in [5, 25] mixed with rule 0 or 25); --scale
multiplies what the trainer routes return (0.04 gives [0, 1]).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := ho.Edge.Validate(); err != nil {
				return err
			}
			ho.Edge.Hints = settingHints("reward serve", rewardSettingFlags)
			if ho.APIKey == "" {
				ho.APIKey = envconfig.APIKey.Value()
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			m := reward.NewMetrics(reg)
			s, err := f.scorer(cmd, m.ObserveJudgeCall)
			if err != nil {
				return err
			}
			m.RegisterScorer(reg, s)
			ho.Metrics, ho.Registry, ho.Logger = m, reg, logger(cmd)
			h, err := reward.NewHandler(s, &ho)
			if errors.Is(err, reward.ErrDropOnTrainerRoute) {
				return fmt.Errorf("--on-judge-failure drop: %w; use rules or zero, or serve the batch API alone with --batch-only", err)
			}
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			logger(cmd).Info("agentworld reward serve", "addr", ln.Addr().String(), "judge", s.JudgeModel(), "auth", ho.APIKey != "")
			fmt.Fprintf(cmd.ErrOrStderr(), "serving rewards on http://%s (judge %s; judge prompts: %s)\n", ln.Addr(), s.JudgeModel(), s.Prompts().Label())
			return h.Serve(cmd.Context(), ln, drain)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", "127.0.0.1:8090", "listen address")
	fl.StringVar(&ho.APIKey, "api-key", "", "require this bearer token on every route but /health (default: "+envconfig.APIKey.Name+")")
	usesEnv(cmd, envconfig.APIKey)
	fl.StringVar(&ho.DataSource, "data-source", "", "domain of trainer requests that name none (a label that is a plain ground truth), e.g. agentworld/terminal")
	fl.Float64Var(&ho.Scale, "scale", 1, "factor on the numbers the trainer routes return (0.04 maps [0, 25] to [0, 1])")
	fl.IntVar(&ho.MaxBatch, "max-batch", 4096, "items per request at most")
	fl.BoolVar(&ho.BatchOnly, "batch-only", false, "serve the native batch API alone, without the trainer routes (needed by --on-judge-failure drop)")
	fl.DurationVar(&drain, "drain-timeout", 2*time.Minute, "on shutdown, how long requests in flight may take to finish")
	registerEdgeFlags(cmd, &ho.Edge, false)
	return cmd
}

func newRewardScoreCmd() *cobra.Command {
	var (
		f       rewardFlags
		in, out string
		workers int
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "score --in ITEMS.jsonl --out RESULTS.jsonl [--judge-url URL --judge-model NAME]",
		Short: "Score a JSONL file of reward items offline (resumable)",
		Long: `Score every item of --in (one JSON object per line, the native batch API's
item: {id, data_source, prompt, response, ground_truth, extra_info}) and
append one result per line to --out ({"line": N, ...the result}). Run the
same command again after a crash or kill: the lines already in --out are
kept, a torn last line is cut, and only the missing items are scored.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := need(map[string]string{"--in": in, "--out": out}); err != nil {
				return err
			}
			s, err := f.scorer(cmd, nil)
			if err != nil {
				return err
			}
			sum, err := reward.ScoreFile(cmd.Context(), s, in, out, &reward.FileOptions{Workers: workers, Progress: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			st := s.Stats()
			prompts := s.Prompts().Label()
			return writeResult(cmd, asJSON, map[string]any{"summary": sum, "stats": st, "judge_prompts": prompts}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%d items: %d resumed, %d scored now; %d failed (0 or dropped, with a reason), %d judge fallbacks to the rules scorer\njudge %s: %d calls, %d transport errors, %d unparsed answers, %d cache hits\njudge prompts: %s\n",
					sum.Total, sum.Resumed, sum.Scored, sum.Failed, sum.JudgeFallback, s.JudgeModel(), st.JudgeCalls, st.JudgeErrors, st.JudgeUnparsed, st.CacheHits, prompts)
				return err
			})
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&in, "in", "", "JSONL file of reward items")
	fl.StringVar(&out, "out", "", "JSONL file of results (appended; resumes)")
	fl.IntVar(&workers, "workers", 64, "items scored at once (judge calls stay within --judge-concurrency)")
	fl.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}
