package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/journal"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/research"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

func newResearchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "research",
		Short: "Improve a world-model template version by reflective search, with a significance test",
	}
	var out string
	cmd.PersistentFlags().StringVar(&out, "out", "", "the research run's output directory")
	lib := func() (*promptlib.Library, error) {
		if out == "" {
			return nil, errors.New("--out: required")
		}
		return promptlib.Open(filepath.Join(out, "templates"))
	}
	cmd.AddCommand(newResearchRunCmd(), &cobra.Command{
		Use: "log --out DIR", Short: "Print the iterations of a research run: candidates, parents, scores, rationales", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out: required")
			}
			f, err := os.Open(filepath.Join(out, "journal.jsonl"))
			if err != nil {
				return err
			}
			defer f.Close()
			j, err := research.ReadJournal(f)
			if err != nil {
				return err
			}
			return writeResearchLog(cmd.OutOrStdout(), j)
		},
	}, &cobra.Command{
		Use: "diff A B --out DIR", Short: "Show how two versions of a research run differ", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lib()
			if err != nil {
				return err
			}
			return printDiff(cmd, l, args[0], args[1])
		},
	}, &cobra.Command{
		Use: "promote V --out DIR", Short: "Make version V the one serve uses with --template-dir DIR/templates", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lib()
			if err != nil {
				return err
			}
			return promote(cmd, l, args[0])
		},
	})
	return cmd
}

func newResearchRunCmd() *cobra.Command {
	var (
		data, dom, out string
		tmpl           templateFlags
		model, opt     transportFlags
		jf             judgeFlags
		o              research.Options
		concurrency    int
		limits         research.Limits
		realDir        string
	)
	cmd := &cobra.Command{
		Use:   "run --data FILE --domain D --model-url URL --model NAME --optimizer-url URL --optimizer-model NAME --out DIR",
		Short: "Search for a better template of one domain and test it against the seed on held-out trajectories",
		Long: `research run splits the trajectories of --data (unified JSONL with
components) by trajectory into train, validation and test. Each iteration
scores a parent version on a train minibatch through the bench pipeline
(cached under --out), shows the optimizer model the worst samples with the
judge's weaknesses, and adds its edited template to the template library as
a new version; an edit that beats its parent on the minibatch is scored on
validation. The best validation version meets the seed on the test split:
the report says "improved" only when the 95% paired bootstrap interval over
test trajectories excludes zero. Rerunning with the same --out resumes.
--judge rules scores offline; its numbers are not comparable with the
rubric judge's, and every report and log says so.

--budget and --budget-tokens cap the calls and tokens of the world model,
the judge, the optimizer and the real check together; answers from the
cache are free, and a resumed run counts on from its journal. The token cap
holds: each call reserves its prompt plus its whole max_tokens before it is
sent (calls without one are sent --budget-completion-tokens), so the run
may stop with up to one such call's worth unspent. The test
split's calls are held back during the search, so a run that ends on its
budget still compares its best candidate with the seed.

--verify DIR also scores candidates by teacher-forced divergence on the
recorded real trajectories in DIR (as agentworld verify does): a candidate
that diverges more than the seed by over --verify-tolerance points is
rejected, however the judge liked it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := need(map[string]string{"--data": data, "--domain": dom, "--out": out, "--model-url": model.url, "--model": model.model, "--optimizer-url": opt.url, "--optimizer-model": opt.model}); err != nil {
				return err
			}
			d, err := domain.Parse(dom)
			if err != nil {
				return flagErr("domain", err)
			}
			trajs, err := datapipe.ReadTrajectories(data)
			if err != nil {
				return err
			}
			if tmpl.dir == "" {
				tmpl.dir = filepath.Join(out, "templates")
			}
			lib, err := tmpl.library()
			if err != nil {
				return err
			}
			cache, err := answercache.OpenCache(filepath.Join(out, bench.CacheDir), &answercache.CacheOptions{Logger: logger(cmd)})
			if err != nil {
				return err
			}
			// A close error costs only calls on a later run, as Put's do.
			defer func() { _ = cache.Close() }()
			base := bench.Options{Concurrency: concurrency, Cache: cache, Logger: logger(cmd)}
			model.setModel(cmd, &base)
			if err := jf.apply(cmd, &base); err != nil {
				return err
			}
			jpath := filepath.Join(out, "journal.jsonl")
			if err := journal.CutTornTail(jpath); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if f, err := os.Open(jpath); err == nil {
				o.Resume, err = research.ReadJournal(f)
				f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", jpath, err)
				}
			}
			jfile, err := os.OpenFile(jpath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			defer jfile.Close()

			// Every paid endpoint is metered inside its cache, so that what
			// a cache answers is free; the copy baseline costs nothing.
			budget := research.NewBudget(limits)
			o.SampleCalls = 0
			if base.Model != (bench.CopyBaseline{}) {
				base.Model = budget.Meter("model", base.Model)
				o.SampleCalls++
			}
			if base.JudgeModel != nil {
				base.JudgeModel = budget.Meter("judge", base.JudgeModel)
				o.SampleCalls++
			}
			o.SampleCalls = max(o.SampleCalls, 1)
			o.Budget = budget
			o.Library, o.Seed, o.Domain, o.Trajectories = lib, tmpl.ref, d, trajs
			o.Evaluator = &benchEvaluator{dir: filepath.Join(out, "evals"), base: base, lib: lib}
			// The optimizer keeps only the answers it can use in the cache:
			// a bad answer is asked again, on this run and the next.
			o.Optimizer = research.NewModelOptimizer(budget.Meter("optimizer", opt.client(cmd)), opt.model, &research.OptimizerOptions{Cache: cache})
			o.ModelName, o.OptimizerName, o.Offline = model.model, opt.model, jf.kind == "rules"
			o.JudgeName = jf.tf.model
			if o.Offline {
				o.JudgeName = bench.RulesJudgeName
			} else if base.JudgeText != nil {
				o.JudgePrompts = base.JudgeText.Label
			}
			if realDir != "" {
				var c worldmodel.Completer = bench.CopyBaseline{}
				if model.url != bench.CopyBaselineURL {
					c = budget.Meter("verify", model.client(cmd))
				}
				backend := sim.NewModelBackend(cache.Completer(c, model.model), &sim.ModelOptions{Model: model.model})
				if o.Real, err = research.NewRealCheck(realDir, d, backend, &research.RealCheckOptions{Concurrency: concurrency}); err != nil {
					return fmt.Errorf("--verify: %w", err)
				}
				o.RealName = filepath.Base(filepath.Clean(realDir))
				if o.RealTolerance == 0 {
					o.RealTolerance = -1 // the flag's 0 is no tolerance, not the default
				}
			}
			o.Journal, o.Logger, o.Progress = jfile, logger(cmd), cmd.ErrOrStderr()
			printEstimate(cmd, research.EstimateCost(o), d, limits, o.Resume)
			rep, err := research.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			b, err := trajectory.Marshal(rep)
			if err != nil {
				return err
			}
			if err := atomicfile.WriteFile(filepath.Join(out, "report.json"), append(b, '\n'), nil); err != nil {
				return err
			}
			return rep.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", "", "unified trajectories (JSONL): with components, or with a system prompt they are recovered from (data convert --from bench output)")
	f.StringVar(&dom, "domain", "", "the domain whose template is searched")
	f.StringVar(&out, "out", "", "output directory: journal, report, bench evaluations and their cache")
	tmpl.register(cmd, "seed version (a name like v3, or an id prefix); empty: the library's promoted version, else v0")
	cmd.Flags().Lookup("template-dir").Usage = "template library the candidates are added to (default: OUT/templates)"
	model.register(cmd, "model-", "world model", envconfig.ModelAPIKey)
	f.StringVar(&model.model, "model", "", "model name of the world model")
	jf.register(cmd)
	opt.register(cmd, "optimizer-", "optimizer model", envconfig.OpenAIAPIKey)
	f.StringVar(&opt.model, "optimizer-model", "", "model name of the optimizer")
	f.IntVar(&o.Iterations, "iterations", 10, "optimizer proposals (each costs up to three bench evaluations: parent and candidate on a minibatch, candidate on validation)")
	f.IntVar(&o.Minibatch, "minibatch", 4, "train trajectories per iteration")
	f.Uint64Var(&o.RandSeed, "seed", 1, "seed of the split, minibatches and parent draws")
	f.IntVar(&concurrency, "concurrency", bench.DefaultConcurrency, "samples in flight per evaluation")
	f.IntVar(&limits.Calls, "budget", 0, "cap on world-model, judge, optimizer and real-check calls together (cache hits are free; a resumed run counts on); the test split's calls are held back from it; 0: no cap")
	f.Int64Var(&limits.Tokens, "budget-tokens", 0, "cap on the prompt plus completion tokens of those calls (as the endpoints report them, else estimated at four bytes a token); a call is sent only when its prompt and its whole max_tokens fit in what is left; 0: no cap")
	f.IntVar(&limits.Completion, "budget-completion-tokens", 0, fmt.Sprintf("under --budget-tokens, the max_completion_tokens sent with the judge's and the optimizer's calls when they set no --judge-max-tokens (0: %d)", research.DefaultCompletion))
	f.StringVar(&realDir, "verify", "", "directory of recorded real trajectories (realenv recordings, .json/.jsonl): candidates are also scored by teacher-forced divergence on them, and one that diverges more than the seed beyond --verify-tolerance is rejected")
	f.Float64Var(&o.RealTolerance, "verify-tolerance", 1, "divergence points (0..100) a candidate may lose to the seed on --verify before it is rejected; 0: none")
	return cmd
}

// printEstimate writes the worst-case cost of a run before it starts, and
// what an earlier run of the same output directory already spent.
func printEstimate(cmd *cobra.Command, est research.Estimate, d domain.Domain, l research.Limits, resume *research.Journal) {
	w := cmd.ErrOrStderr()
	fmt.Fprintf(w, "research: %d usable %s trajectories (with components, or a system prompt they are recovered from; %d train, %d validation, %d test); at most %d samples (one world-model and one judge call each, fewer when cached) and %d optimizer calls",
		est.Trajectories, d, est.Train, est.Val, est.Test, est.Samples, est.OptimizerCalls)
	if est.RealCalls > 0 {
		fmt.Fprintf(w, " and %d real-check calls", est.RealCalls)
	}
	fmt.Fprintf(w, ": at most %d calls, roughly %d tokens\n", est.Calls, est.Tokens)
	if l != (research.Limits{}) {
		fmt.Fprintf(w, "research: budget %s; %d calls of it held back for the final test\n", research.Spend{}.String(l), est.TestCalls)
		if l.Calls > 0 && est.TestCalls >= l.Calls {
			fmt.Fprintf(w, "research: warning: --budget %d cannot hold the test split's %d calls; the run will likely end without a test comparison\n", l.Calls, est.TestCalls)
		}
	}
	if resume != nil && resume.Spent.Calls > 0 {
		fmt.Fprintf(w, "research: resuming after %d iterations; already spent %s\n", len(resume.Iterations), resume.Spent.String(l))
	}
}

// writeResearchLog prints a research journal: the run's settings, each
// iteration with its scores and the spend so far, and a budget stop.
func writeResearchLog(w io.Writer, j *research.Journal) error {
	var b strings.Builder
	if h := j.Header; h != nil {
		if h.Offline {
			b.WriteString(research.OfflineLabel + "\n")
		}
		fmt.Fprintf(&b, "research %s from seed %.12s: world model %s, judge %s, optimizer %s", h.Domain, h.Seed, h.Model, h.Judge, h.Optimizer)
		if h.Real != "" {
			fmt.Fprintf(&b, ", real check on %s", h.Real)
		}
		b.WriteString("\n")
	}
	for _, it := range j.Iterations {
		fmt.Fprintf(&b, "%d %s %.12s from %.12s: minibatch %.2f -> %.2f", it.N, it.Name, it.Candidate, it.Parent, it.ParentMinibatch, it.CandidateMinibatch)
		if it.Real != nil {
			fmt.Fprintf(&b, ", real divergence %.2f", it.Real.Divergence)
		}
		fmt.Fprintf(&b, ", %s\n  %s\n", it.Status(), it.Rationale)
		if it.Spent != nil {
			fmt.Fprintf(&b, "  spent so far: %s\n", it.Spent.String(research.Limits{}))
		}
	}
	if st := j.Stop; st != nil {
		fmt.Fprintf(&b, "ended on budget before iteration %d: %s\nspent: %s\n", st.Iteration, st.Reason, st.Spent.String(st.Limits))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// benchEvaluator scores a version with the bench pipeline: the
// trajectories become benchmark records, which bench re-renders under the
// version (bench --template: components recovered from each system prompt),
// in a run directory named by the version and the trajectory set, so a
// rerun finds the finished run (and the shared cache) and calls no model
// again.
type benchEvaluator struct {
	dir  string
	base bench.Options
	// lib recognises the prompts its versions rendered.
	lib *promptlib.Library
}

func (e *benchEvaluator) Evaluate(ctx context.Context, v *promptlib.Version, d domain.Domain, trajs []*trajectory.Trajectory) (*research.Evaluation, error) {
	h := sha256.New()
	for _, t := range trajs {
		fmt.Fprintf(h, "%s\x00", t.ID)
	}
	run := filepath.Join(e.dir, v.Short()+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	if err := os.MkdirAll(run, 0o755); err != nil {
		return nil, err
	}
	var buf []byte
	for i, t := range trajs {
		recs, err := trajectory.BenchRecords(t, int64(i), nil)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			b, err := r.MarshalJSON()
			if err != nil {
				return nil, err
			}
			buf = append(append(buf, b...), '\n')
		}
	}
	data := filepath.Join(run, string(d)+"_test.jsonl")
	if err := atomicfile.WriteFile(data, buf, nil); err != nil {
		return nil, err
	}
	o := e.base
	o.Data, o.Out = data, filepath.Join(run, "bench")
	o.Template = benchTemplateOf(e.lib, v)
	if _, err := bench.Run(ctx, &o); err != nil {
		return nil, err
	}
	rows, err := bench.ReadJudged(bench.JudgedPathOf(o.Out))
	if err != nil {
		return nil, err
	}
	ev := &research.Evaluation{PerTrajectory: map[string]float64{}}
	count := map[string]int{}
	for _, j := range rows {
		i, err := strconv.Atoi(j.ID)
		if err != nil || i < 0 || i >= len(trajs) {
			return nil, fmt.Errorf("%s: row id %q names no trajectory", bench.JudgedPathOf(o.Out), j.ID)
		}
		t := trajs[i]
		s := research.Sample{Trajectory: t.ID, Turn: j.TurnIdx, Prediction: j.Prediction.Prediction, Weaknesses: j.Weaknesses}
		if j.TurnIdx >= 1 && j.TurnIdx <= len(t.Turns) {
			s.Truth = t.Turns[j.TurnIdx-1].Observation
		}
		if j.Valid() { // a failed sample counts as the lowest score
			s.Score = bench.Normalize(j.Total)
		}
		ev.Samples = append(ev.Samples, s)
		ev.PerTrajectory[t.ID] += s.Score
		count[t.ID]++
	}
	for id, n := range count {
		ev.PerTrajectory[id] /= float64(n)
	}
	return ev, nil
}
