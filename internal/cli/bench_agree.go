package cli

import (
	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/agree"
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/labels"
)

func newBenchAgreeCmd() *cobra.Command {
	var (
		labelsPath string
		asJSON     bool
		resamples  int
		seed       uint64
	)
	cmd := &cobra.Command{
		Use:   "agree RUN... [--labels FILE]",
		Short: "How far the judges can be trusted: rankings, rank agreement, agreement with people",
		Long: `Read the judged rows of runs (run directories or judged.jsonl files; typically
the same data predicted by several models and judged by several judges) and
report:

  - each judge's ranking of the models per domain and overall (the unweighted
    mean of the domain scores);
  - Spearman's ρ and Kendall's τ-b between every two judges' rankings, with
    95% bootstrap intervals (trajectories resampled within each domain);
  - the per-sample correlation of two judges' totals of the same predictions;
  - how often each judge's answer never parsed;
  - a warning when a judge and the model it judged are of one family;
  - with --labels (the database agentworld ui --labels writes): quadratic-
    weighted Cohen's κ and Krippendorff's α (interval level) between people
    and each judge, per dimension and pooled, with 95% bootstrap intervals
    over labelled samples; and people's Turing picks per model.

Figures the runs cannot give (one judge, fewer than three models, no labels)
are named under "Not available".`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ls []agree.Label
			if labelsPath != "" {
				var err error
				if ls, err = labels.ReadAgree(cmd.Context(), labelsPath); err != nil {
					return err
				}
			}
			r, err := bench.AgreeRuns(args, ls, &agree.Options{Resamples: resamples, Seed: seed})
			if err != nil {
				return err
			}
			return writeResult(cmd, asJSON, r, r.WriteText)
		},
	}
	cmd.Flags().StringVar(&labelsPath, "labels", "", "label database written by agentworld ui --labels")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of text")
	cmd.Flags().IntVar(&resamples, "resamples", agree.DefaultResamples, "bootstrap resamples of every interval (negative: none)")
	cmd.Flags().Uint64Var(&seed, "seed", agree.DefaultSeed, "bootstrap seed")
	return cmd
}
