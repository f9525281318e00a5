package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/time/rate"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/tracing"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "AgentWorldBench: infer, judge and score a world model",
		Long: `AgentWorldBench measures how faithfully a world model predicts real
environment observations in seven domains.

  bench run      infer → judge → score as one streaming pipeline
  bench worker   do the samples of bench run --queue on this machine
  bench infer    only generate predictions
  bench judge    only judge predictions (an LLM judge, or --judge rules offline)
  bench score    score judged rows
  bench compare  compare runs side by side
  bench report   one self-contained HTML page for a run
  bench agree    how far the judges can be trusted: rankings, ρ, τ, κ, α
  bench cache    the response cache: compact it

A run directory (--out) holds:
  run.json           the settings of the run (a rerun with other settings is refused)
  predictions.jsonl  one row per sample: generation, prediction, reasoning, usage, failure
  judged.jsonl       one row per sample: the prediction with its judge scores
  scores.json        the score report (bench score --json)
  cache/             model and judge responses keyed by request content hash
                     (segments, one per run that stored answers; bench cache compact)

Rows are appended as they arrive, so a killed run loses nothing: rerun the same
command and finished samples are skipped.`,
	}
	cmd.AddCommand(newBenchInferCmd(), newBenchJudgeCmd(), newBenchRunCmd(), newBenchWorkerCmd(), newBenchScoreCmd(), newBenchCompareCmd(), newBenchReportCmd(), newBenchAgreeCmd(), newBenchCacheCmd())
	return cmd
}

// judgeFlags select and configure the judge.
type judgeFlags struct {
	kind    string
	prompts string
	// The pairwise modes (bench judge and bench run only).
	mode       string
	bothOrders bool
	reference  string
	orderSeed  uint64
	tf         transportFlags
	gf         genFlags
}

// promptsUsage documents --prompts wherever the rubric judge is called.
const promptsUsage = "checkout of the official Qwen-AgentWorld repository: judge with its text (prompts/<domain>/judge_system_prompt.txt and the templates of eval/lwm_eval_utils/task_configs.py) for scores comparable with the published table; default: agentworld's own text, which is not"

// loadJudgePrompts reads --prompts (nil for agentworld's own text) and
// warns, on stderr, about files that differ from the official commit's.
func loadJudgePrompts(cmd *cobra.Command, dir string) (*judge.Prompts, error) {
	if dir == "" {
		return nil, nil
	}
	p, err := judge.LoadPrompts(dir)
	if err != nil {
		return nil, fmt.Errorf("--prompts: %w", err)
	}
	if u := p.Unpinned(); len(u) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: --prompts %s: %d of %d judge files differ from the official commit %s (%s); the scores are not those of the published text\n",
			dir, len(u), len(p.Files()), judge.OfficialCommit, strings.Join(u, ", "))
	}
	return p, nil
}

func (j *judgeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&j.kind, "judge", "llm", `judge: "llm" (the rubric judge at --judge-url) or "rules" (offline deterministic scorer, no model needed; not comparable with published scores)`)
	j.tf.register(cmd, "judge-", "judge", envconfig.JudgeAPIKey, envconfig.OpenAIAPIKey)
	cmd.Flags().StringVar(&j.tf.model, "judge-model", "", "model name of the judge")
	cmd.Flags().StringVar(&j.prompts, "prompts", "", promptsUsage)
	j.gf.register(cmd, "judge-", 0, 0, "judge")
}

// registerModes adds the judge-mode flags (bench judge and bench run).
func (j *judgeFlags) registerModes(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&j.mode, "judge-mode", bench.ModePointwise, `"pointwise" (the rubric: five scores per prediction), "turing" (the real observation and the prediction in a seeded random order: can the judge tell which is real? reports the detection rate, 50% = indistinguishable) or "reference" (the prediction against --reference's, both against the ground truth: which is closer?)`)
	f.BoolVar(&j.bothOrders, "both-orders", false, "turing/reference: ask every pair in both orders (two judge calls per sample) and report the flip rate (reference: only with agentworld's text, whose template does not say which response is the world model's)")
	f.StringVar(&j.reference, "reference", "", "reference mode: another model's predictions.jsonl on the same data (e.g. a frontier model's)")
	f.Uint64Var(&j.orderSeed, "order-seed", 0, "turing: seed of the per-sample order of the real observation and the prediction (0: the default seed)")
}

// apply sets the judge of o.
func (j *judgeFlags) apply(cmd *cobra.Command, o *bench.Options) error {
	switch j.kind {
	case "rules":
		if j.prompts != "" {
			return errors.New("--prompts is the LLM judge's text; the rules scorer (--judge rules) has none")
		}
		if j.mode != "" && j.mode != bench.ModePointwise {
			return fmt.Errorf("--judge-mode %s needs an LLM judge, not --judge rules", j.mode)
		}
		o.Rules = judge.RuleScorer{}
		return nil
	case "llm", "":
	default:
		return fmt.Errorf("--judge %q: want llm or rules", j.kind)
	}
	if err := need(map[string]string{"--judge-url": j.tf.url, "--judge-model": j.tf.model}); err != nil {
		return fmt.Errorf("%w (or --judge rules to score offline)", err)
	}
	mt, temp, topP, seed, extra, err := j.gf.parse(cmd, "judge-")
	if err != nil {
		return err
	}
	if mt < 0 {
		mt = 0
	}
	o.Judge = bench.JudgeSettings{MaxTokens: mt, MaxCompletionTokens: j.gf.maxCompletionTokens, Temperature: temp, TopP: topP, Seed: seed, Extra: extra}
	p, err := loadJudgePrompts(cmd, j.prompts)
	if err != nil {
		return err
	}
	text := p.Text()
	o.Rubric, o.JudgeText = judge.Rubric{Prompts: p}, &text
	if _, err := judge.ParseMode(cmp.Or(j.mode, bench.ModePointwise)); err != nil {
		return fmt.Errorf("--judge-mode: %w", err)
	}
	o.JudgeMode, o.BothOrders, o.Reference, o.OrderSeed = j.mode, j.bothOrders, j.reference, j.orderSeed
	o.JudgeModel = j.tf.client(cmd)
	o.JudgeName, o.JudgeURL = j.tf.model, j.tf.url
	return nil
}

// errNoValidSample is the exit of a run in which every sample failed: its
// scores (or its predictions) stand on nothing.
var errNoValidSample = errors.New("no valid sample")

// finish prints the run summary and, when judged, the scores. A run without
// a single valid sample is an error, whatever was printed.
func finish(cmd *cobra.Command, sum *bench.Summary, err error) error {
	printBenchSummary(cmd.ErrOrStderr(), sum)
	if errors.Is(err, bench.ErrSettingsChanged) {
		return fmt.Errorf("%w (the output directory is --out)", err)
	}
	if err != nil {
		return err
	}
	if sum == nil {
		return nil
	}
	failed := 0
	for _, n := range sum.Failed {
		failed += n
	}
	if rep := sum.Report; rep != nil {
		fmt.Fprintln(cmd.OutOrStdout())
		if err := rep.WriteText(cmd.OutOrStdout()); err != nil {
			return err
		}
		if n := sumDomains(rep); n > 0 && rep.ValidSamples() == 0 {
			return fmt.Errorf("%w: all %d samples failed (see the failures above), so the scores mean nothing; fix the cause, then rerun the same command (add --retry-failed to judge judge_unparseable samples again)", errNoValidSample, n)
		}
		return nil
	}
	if sum.PredictionsPath != "" && sum.Resumed == 0 && sum.Done > 0 && failed == sum.Done {
		return fmt.Errorf("%w: all %d predictions failed (see the failures above)", errNoValidSample, sum.Done)
	}
	return nil
}

// sumDomains counts a report's samples, failed ones included.
func sumDomains(rep *bench.Report) int {
	n := 0
	for _, d := range rep.Domains {
		n += d.N
	}
	return n
}

func newBenchJudgeCmd() *cobra.Command {
	var (
		rf          runFlags
		jf          judgeFlags
		predictions string
	)
	cmd := &cobra.Command{
		Use:   "judge --predictions FILE (--judge-url URL --judge-model NAME | --judge rules) [--out DIR]",
		Short: "Judge predictions and score them",
		Long: `Judge every prediction of a predictions file with the rubric judge (three
attempts per sample) or the offline rules scorer, append judged rows to
OUT/judged.jsonl and write OUT/scores.json. The records are read again from
--data (default: the data dir recorded in the predictions' run.json).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if predictions == "" {
				return errors.New("missing required flag: --predictions")
			}
			if rf.out == "" {
				rf.out = filepath.Dir(predictions)
			}
			if rf.data == "" {
				d, err := bench.RunData(filepath.Dir(predictions))
				if err != nil || d == "" {
					return fmt.Errorf("--data not given and no run.json beside %s names it", predictions)
				}
				rf.data = d
			}
			o := rf.options(cmd)
			o.Predictions = predictions
			if err := jf.apply(cmd, o); err != nil {
				return err
			}
			return rf.run(cmd, o)
		},
	}
	cmd.Flags().StringVar(&predictions, "predictions", "", "predictions.jsonl to judge")
	rf.register(cmd)
	jf.register(cmd)
	jf.registerModes(cmd)
	return cmd
}

func newBenchRunCmd() *cobra.Command {
	var f benchRunFlags
	cmd := &cobra.Command{
		Use:   "run --data DIR --model-url URL --model NAME (--judge-url URL --judge-model NAME | --judge rules) --out DIR [--queue nats://HOST:4222]",
		Short: "Infer, judge and score as one streaming pipeline",
		Long: `Run the model under test on every sample and judge each prediction as soon
as it arrives, with one progress line on stderr; then score. Results are
appended as they come: after a crash or kill, rerun the same command and
finished samples are skipped. Responses are cached under OUT/cache, so a
rerun with the same settings costs no calls (--no-cache forces them).

With --queue the samples are done by bench worker processes over NATS
JetStream (see bench worker); this process writes the same files.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.options(cmd)
			if err != nil {
				return err
			}
			if f.queue != "" {
				return f.runQueued(cmd, o)
			}
			return f.rf.run(cmd, o)
		},
	}
	f.register(cmd)
	return cmd
}

func newBenchScoreCmd() *cobra.Command {
	var (
		judged         string
		asJSON, strict bool
	)
	cmd := &cobra.Command{
		Use:   "score --judged FILE [--json] [--strict]",
		Short: "Score judged rows per domain and dimension",
		Long: `Score judged rows: per domain and dimension on the 0-100 scale
((mean-1)/4*100), the headline overall as the unweighted mean of the domain
scores (the leaderboard convention) and the sample-pooled mean (the published
script's figure), failures per domain and reason, and 95% bootstrap intervals
clustered by trajectory. Failed samples are excluded from the means as
published; --strict scores them as the lowest score instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if judged == "" {
				return errors.New("missing required flag: --judged")
			}
			rep, err := bench.ScoreFile(judged, "", &bench.ScoreOptions{Strict: strict})
			if err != nil {
				return err
			}
			return writeResult(cmd, asJSON, rep, rep.WriteText)
		},
	}
	cmd.Flags().StringVar(&judged, "judged", "", "judged.jsonl to score")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object instead of the table")
	cmd.Flags().BoolVar(&strict, "strict", false, "score failed samples as the lowest score instead of excluding them")
	return cmd
}

// transportFlags are the endpoint flags shared by the model and the judge.
type transportFlags struct {
	url, model, apiKey string
	rps                float64
	timeout            time.Duration
	retries            int
	maxResponseBytes   int64
	// env are the variables read, in order, when the key flag is empty.
	env []envconfig.Var
}

// register adds the endpoint flags --<prefix>url, --<prefix>api-key,
// --<prefix>rps, --<prefix>timeout, --<prefix>retries and
// --<prefix>max-response-bytes.
func (t *transportFlags) register(cmd *cobra.Command, prefix, what string, env ...envconfig.Var) {
	t.registerAs(cmd, prefix, prefix+"api-key", prefix, what, env...)
}

// registerAs adds the endpoint flags with explicit names: --<prefix>url,
// --<keyFlag>, and the transport flags named with tprefix (--<tprefix>rps, …).
// When the key flag is empty the key comes from env, the first set.
func (t *transportFlags) registerAs(cmd *cobra.Command, prefix, keyFlag, tprefix, what string, env ...envconfig.Var) {
	t.env = env
	usesEnv(cmd, env...)
	f := cmd.Flags()
	help := "OpenAI-compatible base URL of the " + what + " (e.g. http://localhost:8000/v1)"
	if prefix == "model-" {
		help += `, or "baseline:copy" for the built-in copy-the-last-observation baseline (no server)`
	}
	f.StringVar(&t.url, prefix+"url", "", help)
	f.StringVar(&t.apiKey, keyFlag, "", "API key of the "+what+" (default from the environment)")
	f.Float64Var(&t.rps, tprefix+"rps", 0, "requests per second to the "+what+" (0: unlimited)")
	f.DurationVar(&t.timeout, tprefix+"timeout", worldmodel.DefaultTimeout, "timeout of one request attempt to the "+what)
	f.IntVar(&t.retries, tprefix+"retries", 4, "retries of a failed request to the "+what+" (429, 5xx, timeouts, dropped connections), with exponential backoff and jitter")
	f.Int64Var(&t.maxResponseBytes, tprefix+"max-response-bytes", worldmodel.DefaultMaxResponseBytes, "largest answer read from the "+what+", in bytes; a larger one fails the request unread")
}

func (t *transportFlags) client(cmd *cobra.Command) *worldmodel.Client {
	key := t.apiKey
	if key == "" {
		key = envconfig.First(t.env...)
	}
	o := &worldmodel.Options{APIKey: key, Timeout: t.timeout, MaxRetries: t.retries, MaxResponseBytes: t.maxResponseBytes, Logger: logger(cmd)}
	if t.retries == 0 {
		o.MaxRetries = -1
	}
	if t.rps > 0 {
		o.Limiter = rate.NewLimiter(rate.Limit(t.rps), 1)
	}
	return worldmodel.New(t.url, t.model, o)
}

// setModel sets the model under test of o: the endpoint, or the built-in
// copy baseline for --model-url baseline:copy.
func (t *transportFlags) setModel(cmd *cobra.Command, o *bench.Options) {
	o.ModelName, o.ModelURL = t.model, t.url
	if t.url == bench.CopyBaselineURL {
		o.Model = bench.CopyBaseline{}
		return
	}
	o.Model = t.client(cmd)
}

// genFlags are generation parameters; only those set are sent (beyond the
// published defaults of inference).
type genFlags struct {
	maxTokens           int
	maxCompletionTokens bool
	temperature, topP   float64
	seed                int64
	extraBody           string
}

func (g *genFlags) register(cmd *cobra.Command, prefix string, defMax int, defTemp float64, what string) {
	f := cmd.Flags()
	f.IntVar(&g.maxTokens, prefix+"max-tokens", defMax, "token budget of the "+what+" (0: none sent)")
	f.BoolVar(&g.maxCompletionTokens, prefix+"max-completion-tokens", false, "send the budget as max_completion_tokens (for APIs that reject max_tokens)")
	tempHelp := "sampling temperature of the " + what
	if defTemp == 0 {
		tempHelp += " (sent only when given)"
	}
	f.Float64Var(&g.temperature, prefix+"temperature", defTemp, tempHelp)
	f.Float64Var(&g.topP, prefix+"top-p", 1, "top_p of the "+what+" (sent only when given)")
	f.Int64Var(&g.seed, prefix+"seed", 0, "seed of the "+what+" (sent only when given)")
	f.StringVar(&g.extraBody, prefix+"extra-body", "", `JSON object merged into every request to the `+what+` (e.g. '{"top_k":20}')`)
}

func (g *genFlags) parse(cmd *cobra.Command, prefix string) (maxTokens int, temp, topP *float64, seed *int64, extra map[string]any, err error) {
	f := cmd.Flags()
	maxTokens = g.maxTokens
	if maxTokens == 0 {
		maxTokens = -1
	}
	if f.Changed(prefix+"temperature") || prefix == "" {
		t := g.temperature
		temp = &t
	}
	if f.Changed(prefix + "top-p") {
		v := g.topP
		topP = &v
	}
	if f.Changed(prefix + "seed") {
		v := g.seed
		seed = &v
	}
	if g.extraBody != "" {
		if err = json.Unmarshal([]byte(g.extraBody), &extra); err != nil {
			return 0, nil, nil, nil, nil, fmt.Errorf("--%sextra-body: not a JSON object: %w", prefix, err)
		}
	}
	return maxTokens, temp, topP, seed, extra, nil
}

func (g *genFlags) inferSettings(cmd *cobra.Command) (bench.InferSettings, error) {
	mt, temp, topP, seed, extra, err := g.parse(cmd, "")
	return bench.InferSettings{MaxTokens: mt, MaxCompletionTokens: g.maxCompletionTokens, Temperature: temp, TopP: topP, Seed: seed, Extra: extra}, err
}

// runFlags are the pipeline flags every stage command has.
type runFlags struct {
	data, out, cacheDir           string
	concurrency                   int
	skipBad, noCache, retryFailed bool
	strict                        bool
	// tmpl selects the template version rows are re-rendered under
	// (commands that run the model only).
	tmpl templateFlags
	// otelEndpoint, when set, traces every model and judge call there.
	otelEndpoint string
}

func (r *runFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&r.data, "data", "", "data dir (every *_test.jsonl in it) or one JSONL file")
	f.StringVar(&r.out, "out", "", "run directory for results (rerun the same command to resume)")
	f.StringVar(&r.cacheDir, "cache", "", "response cache directory (default OUT/cache)")
	f.IntVar(&r.concurrency, "concurrency", bench.DefaultConcurrency, "samples in flight")
	f.BoolVar(&r.skipBad, "skip-bad", false, "skip malformed lines (counted and reported) instead of stopping")
	f.BoolVar(&r.noCache, "no-cache", false, "call the endpoints even when a cached response exists")
	if cmd.Name() != "judge" {
		r.tmpl.register(cmd, benchTemplateUsage)
	}
	f.StringVar(&r.otelEndpoint, "otel-endpoint", "", "OTLP HTTP receiver (e.g. http://localhost:4318) to send a span of every model and judge call to, in the OpenTelemetry GenAI conventions (default: off)")
	if cmd.Name() != "infer" {
		f.BoolVar(&r.retryFailed, "retry-failed", false, "judge again the samples an earlier run into --out never got a parseable verdict for (judge_unparseable)")
		f.BoolVar(&r.strict, "strict", false, "score failed samples as the lowest score instead of excluding them (as bench score --strict)")
	}
}

func (r *runFlags) options(cmd *cobra.Command) *bench.Options {
	return &bench.Options{Data: r.data, Out: r.out, SkipBad: r.skipBad, Concurrency: r.concurrency,
		RetryFailed: r.retryFailed, Strict: r.strict, Progress: cmd.ErrOrStderr(), Logger: logger(cmd)}
}

// run opens the response cache and runs the pipeline. The cache directory
// is created only here, once every flag has been checked, so a command
// refused for its flags leaves nothing on disk.
func (r *runFlags) run(cmd *cobra.Command, o *bench.Options) error {
	if !r.noCache && r.out != "" {
		dir := r.cacheDir
		if dir == "" {
			dir = filepath.Join(r.out, bench.CacheDir)
		}
		c, err := answercache.OpenCache(dir, &answercache.CacheOptions{Logger: logger(cmd)})
		if err != nil {
			return err
		}
		// Its error is dropped, as the cache's own write errors are: an
		// answer it failed to keep only costs a call on a later run.
		defer func() { _ = c.Close() }()
		o.Cache = c
	}
	if r.otelEndpoint != "" {
		tr, err := tracing.New(r.otelEndpoint, "agentworld bench")
		if err != nil {
			return err
		}
		// Spans still buffered are sent before the command returns.
		defer func() { _ = tr.Close(context.WithoutCancel(cmd.Context())) }()
		o.Model = tr.Completer(o.Model, tracing.RoleWorldModel, o.ModelName)
		o.JudgeModel = tr.Completer(o.JudgeModel, tracing.RoleJudge, o.JudgeName)
	}
	sum, err := bench.Run(cmd.Context(), o)
	return finish(cmd, sum, err)
}

func newBenchInferCmd() *cobra.Command {
	var (
		rf runFlags
		tf transportFlags
		gf genFlags
	)
	cmd := &cobra.Command{
		Use:   "infer --data DIR --model-url URL --model NAME --out DIR",
		Short: "Generate the world model's predictions for every sample",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := inferOptions(cmd, &rf, &tf, &gf)
			if err != nil {
				return err
			}
			return rf.run(cmd, o)
		},
	}
	rf.register(cmd)
	tf.registerAs(cmd, "model-", "api-key", "", "model under test", envconfig.ModelAPIKey, envconfig.OpenAIAPIKey)
	cmd.Flags().StringVar(&tf.model, "model", "", "model name of the world model under test")
	gf.register(cmd, "", bench.DefaultMaxTokens, bench.DefaultTemperature, "model under test")
	return cmd
}

// need reports the first required flag left empty.
// inferOptions checks the flags every command that runs the model under test
// needs and turns them into pipeline options.
func inferOptions(cmd *cobra.Command, rf *runFlags, tf *transportFlags, gf *genFlags) (*bench.Options, error) {
	if tf.url == bench.CopyBaselineURL && tf.model == "" {
		tf.model = "copy-baseline"
	}
	if err := need(map[string]string{"--data": rf.data, "--out": rf.out, "--model-url": tf.url, "--model": tf.model}); err != nil {
		return nil, err
	}
	o := rf.options(cmd)
	var err error
	if o.Infer, err = gf.inferSettings(cmd); err != nil {
		return nil, err
	}
	tf.setModel(cmd, o)
	if o.Template, err = rf.tmpl.benchTemplate(); err != nil {
		return nil, err
	}
	return o, nil
}

func need(flags map[string]string) error {
	var missing []string
	for name, v := range flags {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("missing required flag(s): %s", strings.Join(missing, ", "))
	}
	return nil
}

// printBenchSummary writes what a run did, failures first, to w.
func printBenchSummary(w io.Writer, s *bench.Summary) {
	if s == nil {
		return
	}
	fmt.Fprintf(w, "samples: %d done of %d (%d resumed from an earlier run) in %s\n", s.Done, s.Total, s.Resumed, s.Elapsed.Round(time.Millisecond))
	if s.CacheHits+s.CacheMisses > 0 {
		fmt.Fprintf(w, "cache: %d hits, %d misses\n", s.CacheHits, s.CacheMisses)
	}
	if s.CacheCorrupt > 0 {
		fmt.Fprintf(w, "cache: %d damaged lines in %s skipped (an answer one held costs a call again); `agentworld bench cache compact %s` drops them\n", s.CacheCorrupt, s.CacheDir, s.CacheDir)
	}
	if s.Truncated > 0 {
		fmt.Fprintf(w, "cut by the token budget (finish_reason=length): %d generations — raise --max-tokens (thinking models need 8K+)\n", s.Truncated)
	}
	if s.GenericJudge > 0 {
		fmt.Fprintf(w, "unknown domain, judged with the generic prompt: %d samples\n", s.GenericJudge)
	}
	if s.Unpredicted > 0 {
		fmt.Fprintf(w, "data rows without a prediction (not judged): %d\n", s.Unpredicted)
	}
	if s.Source.Invalid > 0 {
		fmt.Fprintf(w, "invalid records: %d\n", s.Source.Invalid)
	}
	if s.Source.Skipped > 0 {
		fmt.Fprintf(w, "malformed lines skipped: %d\n", s.Source.Skipped)
		for _, e := range s.Source.SkippedErrors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if len(s.Failed) > 0 {
		var parts []string
		for _, k := range []string{bench.FailNoGeneration, bench.FailLength, bench.FailJudgeUnparsable, bench.FailTransport, bench.FailInvalidRecord, bench.FailNoReference} {
			if n := s.Failed[k]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", k, n))
			}
		}
		fmt.Fprintf(w, "failed samples (this run): %s\n", strings.Join(parts, ", "))
		for _, e := range s.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// writeResult prints v as indented JSON with --json, else as text.
func writeResult(cmd *cobra.Command, asJSON bool, v any, text func(io.Writer) error) error {
	if !asJSON {
		return text(cmd.OutOrStdout())
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
	return err
}

func newBenchCompareCmd() *cobra.Command {
	var asJSON, strict, mixed bool
	cmd := &cobra.Command{
		Use:   "compare BASELINE RUN...",
		Short: "Compare runs side by side: domain × dimension, deltas, CI separation",
		Long: `Score each run (a run directory or its judged.jsonl) and print a domain ×
dimension table with each run's value, its delta from the first run (Δ = run −
first run: positive means the run scores higher than the first) and whether
their 95% intervals are disjoint.

Runs scored by different judges (--judge rules against an LLM judge, or two
LLM judges), or by judges given different judge texts (agentworld's own
against the official one from --prompts, or official files whose SHA-256
differ), are not on one scale and are refused; --mixed-judges compares them
anyway, naming each run's judge and text above the table.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := bench.CompareRuns(args, &bench.ScoreOptions{Strict: strict})
			if err != nil {
				return err
			}
			if c.JudgesDiffer() && !mixed {
				var parts []string
				for i, l := range c.Labels {
					parts = append(parts, fmt.Sprintf("%s: %s", l, strings.Join(c.Judges[i], "+")))
				}
				return fmt.Errorf("the runs were scored by different judges (%s), so their scores are not on one scale; judge them alike, or pass --mixed-judges to compare anyway", strings.Join(parts, "; "))
			}
			if c.ModesDiffer() {
				return fmt.Errorf("the runs were judged in different judge modes (%s): a rubric score, a detection rate and a win rate measure different things; compare runs of one mode", strings.Join(c.Modes, ", "))
			}
			if c.PromptsDiffer() && !mixed {
				return fmt.Errorf("the runs' judges were given different judge texts (%s), so their scores are not on one scale; judge them with the same --prompts, or pass --mixed-judges to compare anyway", c.PromptsText())
			}
			return writeResult(cmd, asJSON, c, c.WriteText)
		},
	}
	cmd.Flags().BoolVar(&mixed, "mixed-judges", false, "compare runs scored by different judges (labelled in the output) instead of refusing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of the table")
	cmd.Flags().BoolVar(&strict, "strict", false, "score failed samples as the lowest score instead of excluding them")
	return cmd
}

func newBenchReportCmd() *cobra.Command {
	var (
		htmlPath, data string
		strict         bool
	)
	cmd := &cobra.Command{
		Use:   "report RUN [--html FILE]",
		Short: "Report a run: the text report on stdout, or one self-contained HTML page",
		Long: `Report a run (a run directory or its judged.jsonl). Without --html the
report is printed as text: the score table with 95% intervals, both
overall figures, the failures and the trust section. With --html FILE it
is written as one HTML page instead: the score table, a per-domain bar
chart with 95% intervals, failures, and the worst samples with context,
prediction against ground truth and the judge's weaknesses (records read
from --data, default: the run's run.json).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := &bench.ScoreOptions{Strict: strict}
			if htmlPath == "" {
				rep, _, err := bench.LoadRun(args[0], opts)
				if err != nil {
					return err
				}
				return rep.WriteText(cmd.OutOrStdout())
			}
			if err := bench.WriteHTMLReport(args[0], htmlPath, data, opts); err != nil {
				return err
			}
			_, err := fmt.Fprintln(cmd.ErrOrStderr(), "wrote", htmlPath)
			return err
		},
	}
	cmd.Flags().StringVar(&htmlPath, "html", "", "write the report as an HTML page to this file (default: text on stdout)")
	cmd.Flags().StringVar(&data, "data", "", "data dir of the run (default: from run.json)")
	cmd.Flags().BoolVar(&strict, "strict", false, "score failed samples as the lowest score instead of excluding them")
	return cmd
}
