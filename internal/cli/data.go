package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentworld/agentworld/internal/convert"
	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/datastats"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/masking"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/rejection"
	"github.com/agentworld/agentworld/internal/trainset"
)

// newDataCmd wires `agentworld data`, the training-data pipeline.
func newDataCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "data",
		Short: "Training data: schema, validation, conversion, turn expansion, loss masking, statistics, export",
	}
	cmd.AddCommand(newDataSchemaCmd(), newDataValidateCmd(), newDataConvertCmd(), newDataExpandCmd(),
		newDataExportCmd(), newDataMaskCmd(), newDataStatsCmd(), newDataSampleCmd())
	return cmd
}

// pipelineFlags are the flags every streaming data command shares.
type pipelineFlags struct {
	workers  int
	onError  string
	maxLine  int
	progress bool
}

func (p *pipelineFlags) add(cmd *cobra.Command) {
	cmd.Flags().IntVar(&p.workers, "workers", 1, "goroutines processing records")
	cmd.Flags().StringVar(&p.onError, "on-error", "skip", "bad records: skip (report, count, go on) or fatal (stop)")
	cmd.Flags().IntVar(&p.maxLine, "max-line", datapipe.DefaultMaxLine, "longest accepted input line in bytes")
	cmd.Flags().BoolVar(&p.progress, "progress", term.IsTerminal(int(os.Stderr.Fd())), "show a progress bar on stderr (default: when stderr is a terminal)")
}

func (p *pipelineFlags) options(cmd *cobra.Command) (*datapipe.Options, error) {
	oe, err := datapipe.ParseOnError(p.onError)
	if err != nil {
		return nil, flagErr("on-error", err)
	}
	o := &datapipe.Options{Workers: p.workers, OnError: oe, MaxLine: p.maxLine, Logger: logger(cmd)}
	if p.progress {
		o.Progress = cmd.ErrOrStderr()
	}
	return o, nil
}

func printSummary(cmd *cobra.Command, s *datapipe.Summary) {
	if s != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), s.String())
	}
}

func newDataSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the unified trajectory format",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(datapipe.TrajectorySchema())
			return err
		},
	}
}

func newDataValidateCmd() *cobra.Command {
	var pf pipelineFlags
	cmd := &cobra.Command{
		Use:   "validate FILES...",
		Short: "Check unified trajectory JSONL files; print file:line: field: problem for every invalid line",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := pf.options(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			sum, err := datapipe.Validate(ctx, args, cmd.OutOrStdout(), opts)
			printSummary(cmd, sum)
			if err != nil {
				return err
			}
			if sum.Skipped > 0 {
				return fmt.Errorf("%d invalid line(s)", sum.Skipped)
			}
			return nil
		},
	}
	pf.add(cmd)
	return cmd
}

func newDataMaskCmd() *cobra.Command {
	var pf pipelineFlags
	var out, config, printConfig, calibrate string
	var minTurns int
	cmd := &cobra.Command{
		Use:   "mask FILES...",
		Short: "Write each turn's statistics (OL, Nov, Jac, R), masking category and loss weight as JSONL",
		RunE: func(cmd *cobra.Command, args []string) error {
			if printConfig != "" {
				return writeConfig(cmd.OutOrStdout(), config, printConfig)
			}
			if len(args) == 0 {
				return fmt.Errorf("mask: no input files")
			}
			cfg, err := masking.LoadMaskingConfig(config)
			if err != nil {
				return err
			}
			opts, err := pf.options(cmd)
			if err != nil {
				return err
			}
			if calibrate != "" {
				return runCalibrate(cmd, args, cfg, calibrate, minTurns, opts)
			}
			return runToOutput(cmd, out, func(ctx context.Context, w io.Writer) (*datapipe.Summary, error) {
				return masking.Mask(ctx, args, w, cfg, opts)
			})
		},
	}
	pf.add(cmd)
	cmd.Flags().StringVarP(&out, "out", "o", "", "output file (default stdout)")
	cmd.Flags().StringVar(&config, "config", "", "masking config YAML (default: the built-in seven categories)")
	cmd.Flags().StringVar(&printConfig, "print-config", "", "print the masking config as yaml or json and exit")
	cmd.Flags().StringVar(&calibrate, "calibrate", "", "instead of rows, write to FILE.yaml a config with per-domain bounds from corpus quantiles and print category shares under both")
	cmd.Flags().IntVar(&minTurns, "min-turns", 200, "--calibrate: fewest turns a domain needs for its own bounds")
	return cmd
}

// runCPT writes continued-pretraining shards into the --out directory.
func runCPT(cmd *cobra.Command, files []string, ef *expandFlags, co *trainset.CPTOptions) error {
	if ef.out == "" || ef.out == "-" {
		return fmt.Errorf("export --mode cpt writes shards into a directory: give --out DIR")
	}
	if ef.stage == "" && ef.mixes != "" {
		ef.stage = "cpt"
	}
	co.Stage, co.Mixes = ef.stage, ef.mixes
	ef.mode = "sft"
	opts, xo, err := ef.options(cmd)
	if err != nil {
		return err
	}
	m, sum, err := trainset.ExportCPT(cmd.Context(), files, ef.out, xo, co, opts)
	printSummary(cmd, sum)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%d shard(s) in %s: %d trajectory and %d corpus document(s), ~%d and ~%d tokens (corpus share %.3f of %.3f asked%s), %d duplicate(s) dropped\n",
		len(m.Shards), ef.out, m.Documents["trajectory"], m.Documents["corpus"], m.Tokens["trajectory"], m.Tokens["corpus"],
		m.CorpusRatio, m.CorpusTarget, map[bool]string{true: "; the corpus ran out", false: ""}[m.CorpusExhausted], m.Duplicates)
	return nil
}

// runCalibrate writes the calibrated masking config and prints the shares.
func runCalibrate(cmd *cobra.Command, files []string, base *masking.MaskingConfig, path string, minTurns int, opts *datapipe.Options) error {
	c, sum, err := masking.Calibrate(cmd.Context(), files, base, &masking.CalibrateOptions{MinTurns: minTurns}, opts)
	printSummary(cmd, sum)
	if err != nil {
		return err
	}
	w, err := datapipe.CreateOutput(path, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "# Masking config calibrated by `agentworld data mask --calibrate` on %d turn(s):\n"+
		"# the top-level categories are the base config's; each domain under\n"+
		"# domains moves every ol/nov/jac/r bound to its own value at the bound's\n"+
		"# rank in the whole corpus (docs/masking.md, Calibration).\n", c.All.Turns)
	if err := c.Config.Encode(w, "yaml"); err != nil {
		w.Abort()
		return err
	}
	if err := w.Commit(); err != nil {
		return err
	}
	return c.WriteTable(cmd.OutOrStdout())
}

// writeConfig prints the effective masking config; the shipped defaults
// are printed as the commented file they are.
func writeConfig(w io.Writer, path, format string) error {
	if format == "yaml" && path == "" {
		_, err := w.Write(masking.DefaultMaskingConfig())
		return err
	}
	cfg, err := masking.LoadMaskingConfig(path)
	if err != nil {
		return err
	}
	return cfg.Encode(w, format)
}

// expandFlags are the flags of commands that expand trajectories into
// samples (expand, export): the pipeline's, the expansion's, the template
// version or stage mix, --out and --keep-duplicates.
type expandFlags struct {
	pf                                             pipelineFlags
	mode, policy, mixes, oldTemplates, config, out string
	stage                                          string
	version                                        templateFlags
	seed                                           uint64
	keepDup                                        bool
}

func (e *expandFlags) add(cmd *cobra.Command, outHelp string) {
	e.pf.add(cmd)
	cmd.Flags().StringVarP(&e.out, "out", "o", "", outHelp)
	cmd.Flags().BoolVar(&e.keepDup, "keep-duplicates", false, "keep exact duplicate samples (dedup memory grows ~16 B per sample)")
	cmd.Flags().StringVar(&e.mode, "mode", "sft", "sft: every turn; rl: exactly one turn per trajectory; export also takes cpt: one text document per trajectory")
	cmd.Flags().StringVar(&e.policy, "policy", "uniform", "rl turn choice: uniform, or weighted by the masking category weight")
	cmd.Flags().Uint64Var(&e.seed, "seed", 0, "seed of the rl turn choice and template draws")
	e.version.register(cmd, "world-model template version (as serve --template: a name like v3 or an id prefix) every system prompt is rendered with; samples pin it")
	cmd.Flags().StringVar(&e.mixes, "mixes", "", "stage mixes YAML (as template mixes checks): each trajectory draws a version by weight from the mix of --stage; samples pin it")
	cmd.Flags().StringVar(&e.stage, "stage", "", "mix of the --mixes file to draw from: cpt, sft or rl (default: the --mode)")
	cmd.Flags().StringVar(&e.oldTemplates, "templates", "", "replaced by --mixes and template versions")
	_ = cmd.Flags().MarkHidden("templates")
	cmd.Flags().StringVar(&e.config, "config", "", "masking config YAML (default: the built-in seven categories)")
}

// errOldTemplates answers the retired --templates flag with what to use.
var errOldTemplates = errors.New("--templates (a file of free-form templates) was replaced by template versions, the ones serve, bench and research use: " +
	"add versions to a library (agentworld template, agentworld research) and select one with --template VERSION --template-dir DIR, " +
	"or declare weighted versions per stage in a --mixes file (check it with agentworld template mixes FILE); " + promptlib.MixesShape)

func (e *expandFlags) options(cmd *cobra.Command) (*datapipe.Options, *expand.ExpandOptions, error) {
	opts, err := e.pf.options(cmd)
	if err != nil {
		return nil, nil, err
	}
	mode, err := expand.ParseMode(e.mode)
	if err != nil {
		return nil, nil, flagErr("mode", err)
	}
	pol, err := expand.ParsePolicy(e.policy)
	if err != nil {
		return nil, nil, flagErr("policy", err)
	}
	cfg, err := masking.LoadMaskingConfig(e.config)
	if err != nil {
		return nil, nil, err
	}
	xo := &expand.ExpandOptions{Mode: mode, Policy: pol, Seed: e.seed, Masking: cfg}
	if e.oldTemplates != "" {
		return nil, nil, errOldTemplates
	}
	if e.mixes != "" && e.version.ref != "" {
		return nil, nil, fmt.Errorf("--template and --mixes: give one (a single version, or a file of weighted versions per stage)")
	}
	if e.stage != "" && e.mixes == "" {
		return nil, nil, fmt.Errorf("--stage needs --mixes")
	}
	lib, err := e.version.library()
	if err != nil {
		return nil, nil, err
	}
	xo.Library = lib
	switch {
	case e.mixes != "":
		m, err := promptlib.LoadMixes(e.mixes, lib)
		if err != nil {
			return nil, nil, flagErr("mixes", err)
		}
		stage := e.stage
		if stage == "" {
			stage = e.mode
		}
		es, err := m.Stage(stage)
		if err != nil {
			return nil, nil, flagErr("stage", err)
		}
		if len(es) == 0 {
			return nil, nil, fmt.Errorf("--mixes %s declares no %s versions (add a %q list, or choose another --stage)", e.mixes, stage, stage)
		}
		xo.Templates = es
	case e.version.ref != "":
		v, err := e.version.version()
		if err != nil {
			return nil, nil, err
		}
		xo.Templates = promptlib.Single(v)
	default:
		// As serve: components are rendered by the library's promoted
		// version (v0 without a library); own prompts are kept.
		if xo.Default, err = lib.Promoted(); err != nil {
			return nil, nil, flagErr("template-dir", err)
		}
	}
	return opts, xo, nil
}

// writeMeta records, beside an export written to a file, the template
// versions it used (trainset.ExportMeta).
func (e *expandFlags) writeMeta(format string, xo *expand.ExpandOptions, sum *datapipe.Summary) error {
	if e.out == "" || e.out == "-" || sum == nil {
		return nil
	}
	m := trainset.NewExportMeta(format, xo, sum)
	if e.mixes != "" {
		m.Mixes, m.Stage = e.mixes, e.stage
		if m.Stage == "" {
			m.Stage = e.mode
		}
	}
	return trainset.WriteExportMeta(trainset.MetaPath(e.out), m)
}

// runToOutput runs fn writing to --out (atomically) and prints the summary.
// errNothingWritten fails a conversion that wrote no record: exiting 0
// with an empty output would pass for a conversion of nothing.
var errNothingWritten = errors.New("no record written")

// wroteSome passes a run's summary and error on, making a run that wrote
// nothing an error saying how much it read and skipped.
func wroteSome(sum *datapipe.Summary, err error) (*datapipe.Summary, error) {
	if err != nil || sum == nil || sum.Written > 0 {
		return sum, err
	}
	if sum.Skipped > 0 {
		return sum, fmt.Errorf("%w: all %d records read were skipped (reasons in the summary above)", errNothingWritten, sum.Skipped)
	}
	return sum, fmt.Errorf("%w: the input holds no records (%d lines read)", errNothingWritten, sum.Lines)
}

func runToOutput(cmd *cobra.Command, out string, fn func(ctx context.Context, w io.Writer) (*datapipe.Summary, error)) error {
	ctx := cmd.Context()
	w, err := datapipe.CreateOutput(out, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	sum, err := fn(ctx, w)
	printSummary(cmd, sum)
	if err != nil {
		w.Abort()
		return err
	}
	return w.Commit()
}

func newDataExpandCmd() *cobra.Command {
	var ef expandFlags
	cmd := &cobra.Command{
		Use:   "expand FILES...",
		Short: "Expand trajectories into turn samples (sft: every turn; rl: one per trajectory) as JSONL",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, xo, err := ef.options(cmd)
			if err != nil {
				return err
			}
			var sum *datapipe.Summary
			if err := runToOutput(cmd, ef.out, func(ctx context.Context, w io.Writer) (*datapipe.Summary, error) {
				sum, err = trainset.Export(ctx, args, w, xo, &trainset.ExportOptions{Format: trainset.FormatSamples, KeepDuplicates: ef.keepDup}, opts)
				return sum, err
			}); err != nil {
				return err
			}
			return ef.writeMeta("samples", xo, sum)
		},
	}
	ef.add(cmd, "output file (default stdout)")
	return cmd
}

// exportMixed writes the world-model RL rows to a file beside --out, then
// the mix of them and the agent's rows to --out.
func exportMixed(cmd *cobra.Command, args []string, ef *expandFlags, xo *expand.ExpandOptions, eo *trainset.ExportOptions, opts *datapipe.Options, mixRows string, ratio float64) error {
	if ef.out == "" || ef.out == "-" {
		return flagErr("out", fmt.Errorf("--mix-rows writes a file: give --out FILE.jsonl"))
	}
	if !(ratio > 0 && ratio < 1) {
		return flagErr("mix-ratio", fmt.Errorf("%v: with --mix-rows, the share of your rows in the output, strictly between 0 and 1", ratio))
	}
	wm := ef.out + ".world-model.jsonl"
	var sum *datapipe.Summary
	var err error
	if err := runToOutput(cmd, wm, func(ctx context.Context, w io.Writer) (*datapipe.Summary, error) {
		sum, err = trainset.Export(ctx, args, w, xo, eo, opts)
		return sum, err
	}); err != nil {
		return err
	}
	defer os.Remove(wm)
	var ms *trainset.MixSummary
	if err := runToOutput(cmd, ef.out, func(ctx context.Context, w io.Writer) (*datapipe.Summary, error) {
		ms, err = trainset.MixRL(wm, mixRows, w, ratio, xo.Seed)
		return nil, err
	}); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "mix: %d world-model rows (of %d) and %d of yours (of %d): %.1f%% yours (--mix-ratio %g), seed %d\n",
		ms.WorldModel, ms.WorldModelAvailable, ms.Agent, ms.AgentAvailable, 100*ms.Ratio, ratio, xo.Seed)
	return ef.writeMeta("rl-jsonl-mix", xo, sum)
}

// rlFormat is the layout of RL rows: --format when given, else the --out
// suffix; anything else is refused rather than guessed.
func rlFormat(flag, out string) (trainset.Format, string, error) {
	name := strings.ToLower(flag)
	if name == "" {
		switch ext := strings.ToLower(filepath.Ext(out)); {
		case out == "" || out == "-":
			name = "jsonl" // stdout: JSON lines
		case ext == ".parquet":
			name = "parquet"
		case ext == ".jsonl":
			name = "jsonl"
		default:
			return 0, "", flagErr("format", fmt.Errorf("--out %s: the RL layout follows the suffix (.parquet or .jsonl); for another name give --format parquet or jsonl", out))
		}
	}
	switch name {
	case "parquet":
		if out == "" || out == "-" {
			return 0, "", flagErr("out", fmt.Errorf("Parquet goes to a file: give --out FILE.parquet"))
		}
		return trainset.FormatVerl, "verl", nil
	case "jsonl":
		return trainset.FormatRLJSONL, "rl-jsonl", nil
	case "swift":
		return trainset.FormatRLSwift, "rl-swift", nil
	}
	return 0, "", flagErr("format", fmt.Errorf("%q: want parquet, jsonl or swift", flag))
}

func newDataExportCmd() *cobra.Command {
	var ef expandFlags
	var split, style, trainer, rlOut, mixRows string
	var cpt trainset.CPTOptions
	var sampled bool
	cmd := &cobra.Command{
		Use:   "export FILES...",
		Short: "Export training files: --mode sft → JSONL for --trainer (ms-swift, LLaMA-Factory, TRL); --mode rl → verl Parquet; --mode cpt → text shards",
		Long: `Export trajectories (or, with --sampled, the selected set of agentworld
data sample) as training files. A directory written by data sample may be
given instead of its sft.jsonl and implies --sampled. Sampled lines keep the
teacher's reasoning where each trainer reads thinking: inline <think>…</think>
before the answer for swift, llamafactory-v0, trl, chat and cpt, the
"reasoning" content block for llamafactory (v1).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			args, sampled, err := exportInputs(args, sampled)
			if err != nil {
				return err
			}
			if sampled && (ef.mixes != "" || ef.version.ref != "" || ef.version.dir != "") {
				return fmt.Errorf("--sampled: the sampled set's prompts are the ones its teacher saw; a template applies when expanding or sampling, not here")
			}
			if ef.mode == "cpt" {
				cpt.KeepDuplicates, cpt.Sampled = ef.keepDup, sampled
				return runCPT(cmd, args, &ef, &cpt)
			}
			opts, xo, err := ef.options(cmd)
			if err != nil {
				return err
			}
			tr, err := trainset.ParseTrainer(trainer)
			if err != nil {
				return flagErr("trainer", err)
			}
			eo := &trainset.ExportOptions{Format: tr.Format(), KeepDuplicates: ef.keepDup, Split: split, RewardStyle: style, Sampled: sampled}
			format := tr.String()
			if xo.Mode == expand.RL {
				if eo.Format, format, err = rlFormat(rlOut, ef.out); err != nil {
					return err
				}
			} else if rlOut != "" {
				return flagErr("format", fmt.Errorf("--format is for --mode rl (sft layouts are chosen with --trainer)"))
			}
			if mixRows != "" {
				if xo.Mode != expand.RL || eo.Format == trainset.FormatVerl {
					return flagErr("mix-rows", fmt.Errorf("mixes RL rows as JSON lines: use --mode rl with --out FILE.jsonl (each row keeps its own fields, which one Parquet schema cannot hold)"))
				}
				return exportMixed(cmd, args, &ef, xo, eo, opts, mixRows, cpt.CorpusRatio)
			}
			var sum *datapipe.Summary
			if err := runToOutput(cmd, ef.out, func(ctx context.Context, w io.Writer) (*datapipe.Summary, error) {
				sum, err = trainset.Export(ctx, args, w, xo, eo, opts)
				return sum, err
			}); err != nil {
				return err
			}
			return ef.writeMeta(format, xo, sum)
		},
	}
	ef.add(cmd, "output file (default stdout; required for rl Parquet)")
	cmd.Flags().StringVar(&rlOut, "format", "", "--mode rl: parquet (verl's layout), jsonl (the same rows as JSON lines) or swift (JSON lines, the prompt under messages as ms-swift reads it); default: from the --out suffix (.parquet, .jsonl)")
	cmd.Flags().StringVar(&split, "split", "train", "extra_info.split of rl rows")
	cmd.Flags().StringVar(&style, "reward-style", "model", "reward_model.style of rl rows")
	cmd.Flags().Int64Var(&cpt.ShardBytes, "shard-bytes", 256<<20, "--mode cpt: largest shard file in bytes (a single larger document gets a shard alone)")
	cmd.Flags().StringSliceVar(&cpt.Corpus, "mix-corpus", nil, "--mode cpt: your own documents to mix in (JSONL with a text field, or .txt/.md files)")
	cmd.Flags().Float64Var(&cpt.CorpusRatio, "mix-ratio", 0, "--mode cpt: share of estimated tokens from --mix-corpus, in [0, 1); --mode rl: share of rows from --mix-rows, in (0, 1)")
	cmd.Flags().StringVar(&mixRows, "mix-rows", "", "--mode rl: your agent's own RL rows (JSONL, each with a data_source not starting with agentworld/) to interleave with the world-model rows, --mix-ratio of the output, seeded by --seed (the LWM warm-up recipe, docs/sim-rl.md)")
	cmd.Flags().BoolVar(&sampled, "sampled", false, "inputs are agentworld data sample's selected set (its sft.jsonl): teacher targets with reasoning, one sample per line")
	cmd.Flags().StringVar(&trainer, "trainer", "swift", "sft layout: swift or llamafactory (one sample per trajectory, exact per-turn weights); llamafactory-v0 or trl (per-turn samples, weights approximated by seeded sampling); chat (per-turn, weights not applied)")
	return cmd
}

// exportInputs resolves export's arguments: a directory written by data
// sample stands for its sft.jsonl and makes the input the sampled set,
// which then must be the whole input.
func exportInputs(args []string, sampled bool) ([]string, bool, error) {
	files := make([]string, len(args))
	dirs := 0
	for i, a := range args {
		files[i] = a
		if st, err := os.Stat(a); err == nil && st.IsDir() {
			f := filepath.Join(a, rejection.SFTFile)
			if _, err := os.Stat(f); err != nil {
				return nil, false, fmt.Errorf("%s is a directory without %s (give trajectory files, or a directory agentworld data sample wrote)", a, rejection.SFTFile)
			}
			files[i] = f
			dirs++
		}
	}
	if dirs > 0 && dirs < len(args) && !sampled {
		return nil, false, fmt.Errorf("a data sample directory and other files: give --sampled if all of them are data sample's selected set")
	}
	return files, sampled || dirs > 0, nil
}

func newDataConvertCmd() *cobra.Command {
	var pf pipelineFlags
	var from, to, out, dom, dbPath string
	var firstID int64
	cmd := &cobra.Command{
		Use:   "convert FILES... | --from sessions --db FILE",
		Short: "Convert AgentWorldBench records, OpenAI chat tool-calling logs, session replies or a serve database's sessions into trajectories, or trajectories into records",
		Long: `Convert into unified trajectories (--to trajectories, the default) from
--from bench (AgentWorldBench rows), openai (chat tool-calling logs),
session (unified trajectories or saved session replies, GET
/v1/sessions/{id}: JSONL, or .json files of one document each, or
directories of them) or sessions (every session of a serve database,
--db FILE, components included; no FILES). --to bench turns trajectories
into benchmark records. A run that writes no record at all fails, saying
why.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := pf.options(cmd)
			if err != nil {
				return err
			}
			if from == "sessions" {
				if dbPath == "" {
					return flagErr("db", errors.New("required with --from sessions: the session database serve used"))
				}
				if len(args) > 0 || to != "trajectories" {
					return errors.New("--from sessions reads --db only: give no FILES and no --to")
				}
				return runToOutput(cmd, out, func(ctx context.Context, w io.Writer) (*datapipe.Summary, error) {
					return wroteSome(convert.FromSessions(ctx, dbPath, w, opts.Norm()))
				})
			}
			if dbPath != "" {
				return flagErr("db", errors.New("only read with --from sessions"))
			}
			if len(args) == 0 {
				return errors.New("no FILES to convert (or --from sessions --db FILE)")
			}
			switch to {
			case "bench":
				return runToOutput(cmd, out, func(ctx context.Context, w io.Writer) (*datapipe.Summary, error) {
					return wroteSome(convert.ToBench(ctx, args, w, &convert.BenchOptions{FirstID: firstID}, opts))
				})
			case "trajectories":
				src, err := convert.ParseSource(from)
				if err != nil {
					return flagErr("from", err)
				}
				return runToOutput(cmd, out, func(ctx context.Context, w io.Writer) (*datapipe.Summary, error) {
					return wroteSome(convert.ToTrajectories(ctx, args, w, src, &convert.ConvertOptions{Domain: dom}, opts))
				})
			}
			return fmt.Errorf("--to %q: want trajectories or bench", to)
		},
	}
	pf.add(cmd)
	cmd.Flags().StringVar(&from, "from", "bench", "input format when --to trajectories: bench, openai, session, or sessions (a serve database, --db)")
	cmd.Flags().StringVar(&dbPath, "db", "", "--from sessions: the session database serve kept (its --db)")
	cmd.Flags().StringVar(&to, "to", "trajectories", "output format: trajectories, or bench (input must be trajectories)")
	cmd.Flags().StringVar(&dom, "domain", "mcp", "domain of OpenAI chat logs")
	cmd.Flags().Int64Var(&firstID, "first-id", 1, "--to bench: id of the first trajectory not converted from records (the next ones count up)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output file (default stdout)")
	return cmd
}

func newDataStatsCmd() *cobra.Command {
	var pf pipelineFlags
	var asJSON bool
	var plotPath, config string
	cmd := &cobra.Command{
		Use:   "stats FILES...",
		Short: "Per-domain distributions (turns, lengths, category shares, statistic histograms) as a table, JSON or a plot",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := pf.options(cmd)
			if err != nil {
				return err
			}
			cfg, err := masking.LoadMaskingConfig(config)
			if err != nil {
				return err
			}
			var format string
			if plotPath != "" {
				if format, err = datastats.PlotFormat(plotPath); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			st, sum, err := datastats.CollectStats(ctx, args, cfg, opts)
			printSummary(cmd, sum)
			if err != nil {
				return err
			}
			if plotPath != "" {
				w, err := datapipe.CreateOutput(plotPath, cmd.OutOrStdout())
				if err != nil {
					return err
				}
				if err := st.WritePlot(w, format); err != nil {
					w.Abort()
					return err
				}
				if err := w.Commit(); err != nil {
					return err
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return st.WriteTable(cmd.OutOrStdout())
		},
	}
	pf.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of tables")
	cmd.Flags().StringVar(&plotPath, "plot", "", "also render the distributions to FILE.png or FILE.svg")
	cmd.Flags().StringVar(&config, "config", "", "masking config YAML (default: the built-in seven categories)")
	return cmd
}
