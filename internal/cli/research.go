package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/dataset"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/promptlib"
	"github.com/agentworld/agentworld/internal/research"
	"github.com/agentworld/agentworld/internal/trajectory"
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
			its, err := research.ReadJournal(f)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, it := range its {
				state := "rejected"
				if it.Accepted {
					state = fmt.Sprintf("accepted, validation %.2f", it.ValMean)
				}
				fmt.Fprintf(w, "%d %s %.12s from %.12s: minibatch %.2f -> %.2f, %s\n  %s\n", it.N, it.Name, it.Candidate, it.Parent, it.ParentMinibatch, it.CandidateMinibatch, state, it.Rationale)
			}
			return nil
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
rubric judge's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := need(map[string]string{"--data": data, "--domain": dom, "--out": out, "--model-url": model.url, "--model": model.model, "--optimizer-url": opt.url, "--optimizer-model": opt.model}); err != nil {
				return err
			}
			d, err := domain.Parse(dom)
			if err != nil {
				return flagErr("domain", err)
			}
			trajs, err := readTrajectories(data)
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
			cache, err := bench.OpenCache(filepath.Join(out, bench.CacheDir))
			if err != nil {
				return err
			}
			base := bench.Options{Concurrency: concurrency, Cache: cache, Logger: logger(cmd)}
			model.setModel(cmd, &base)
			if err := jf.apply(cmd, &base); err != nil {
				return err
			}
			jpath := filepath.Join(out, "journal.jsonl")
			if err := trajectory.CutTornTail(jpath); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
			o.Library, o.Seed, o.Domain, o.Trajectories = lib, tmpl.ref, d, trajs
			o.Evaluator = &benchEvaluator{dir: filepath.Join(out, "evals"), base: base}
			o.Optimizer = research.NewModelOptimizer(opt.client(cmd), opt.model)
			o.Journal, o.Logger = jfile, logger(cmd)
			est := research.EstimateCost(o)
			fmt.Fprintf(cmd.ErrOrStderr(), "research: %d %s trajectories with components (%d train, %d validation, %d test); at most %d samples (one world-model and one judge call each, fewer when cached) and %d optimizer calls\n",
				est.Trajectories, d, est.Train, est.Val, est.Test, est.Samples, est.OptimizerCalls)
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
			if jf.kind == "rules" {
				fmt.Fprintln(cmd.OutOrStdout(), "offline: scored by the rules judge; not comparable with rubric-judge scores")
			}
			return rep.WriteText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", "", "unified trajectories (JSONL) with components")
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
	return cmd
}

// readTrajectories reads unified trajectories, one JSON object a line.
func readTrajectories(path string) ([]*trajectory.Trajectory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	var out []*trajectory.Trajectory
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		t, errs := dataset.DecodeTrajectory(sc.Bytes(), path, line)
		if len(errs) > 0 {
			return nil, errs[0]
		}
		out = append(out, t)
	}
	return out, sc.Err()
}

// benchEvaluator scores a version with the bench pipeline: the
// trajectories become benchmark records whose system prompt the version
// renders, in a run directory named by the version and the trajectory set,
// so a rerun finds the finished run (and the shared cache) and calls no
// model again.
type benchEvaluator struct {
	dir  string
	base bench.Options
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
		recs, err := trajectory.BenchRecords(t, int64(i), v.SystemPrompt())
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
