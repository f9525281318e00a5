package cli

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/httpedge"
	"github.com/agentworld/agentworld/internal/labels"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/ui"
)

func newUICmd() *cobra.Command {
	var (
		addr, db, labelsPath string
		runs, rollouts, res  []string
		edge                 httpedge.Edge
	)
	cmd := &cobra.Command{
		Use:   "ui [--runs DIR]... [--db FILE] [--rollouts DIR] [--research DIR] [--labels FILE]",
		Short: "A web UI over benchmark runs, sessions, rollouts and research runs",
		Long: `Serve a web UI (server-rendered HTML, no external assets, works offline):

  runs       each --runs DIR is a run directory or a directory of them: scores
             with 95% intervals, per-domain figures and chart, the trust report
             and error taxonomy, pages of samples filtered by domain, category,
             score range and full text
  compare    two runs side by side, sample by sample: deltas, sortable, filtered
  sample     history, action, a diff of prediction against truth, the judge's
             reasoning and verdict, rule findings and the taxonomy
  sessions   the simulator's sessions in --db (read-only, beside a running
             serve): live and ended, transcripts paged, fork trees, per-step
             latency, backend and rewards
  rollouts   rollout runs (--rollouts): groups, episodes, rewards
  research   research runs (--research): iterations, scores, template diffs

--labels FILE turns human labelling on: a sample page gets a form to score its
five dimensions or make a Turing pick (order random, source hidden); labels are
stored in FILE (SQLite) and feed the run's trust report and bench agree
--labels FILE. Without it the UI is read-only.

Keyboard: j/k move, Enter opens, n/p page, / search, h home, ? help.
The HTTP edge is serve's: Host and Origin are checked (the --allowed-hosts and
--allowed-origins flags), and a label needs the page's CSRF token.

Each run directory gets a small index file (` + bench.IndexFile + `) so a page of a large run
is read without reading its judged rows; it is rebuilt when judged.jsonl changes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := edge.Validate(); err != nil {
				return err
			}
			edge.Hints = settingHints("ui", edgeSettingFlags)
			serve, err := startUI(cmd, uiConfig{addr: addr, db: db, labels: labelsPath, runs: runs, rollouts: rollouts, research: res, edge: edge})
			if err != nil {
				return err
			}
			return serve(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", "127.0.0.1:8070", "listen address")
	fl.StringSliceVar(&runs, "runs", nil, "benchmark run directory, or a directory of them (repeatable)")
	fl.StringVar(&db, "db", "", "session database of serve (--db), read-only")
	fl.StringSliceVar(&rollouts, "rollouts", nil, "rollout run directory, or a directory of them (repeatable)")
	fl.StringSliceVar(&res, "research", nil, "research run directory, or a directory of them (repeatable)")
	fl.StringVar(&labelsPath, "labels", "", "label database (SQLite, created if missing): turns human labelling on")
	registerEdgeFlags(cmd, &edge, false)
	return cmd
}

// uiConfig is what the UI is started with, by ui or by serve --ui.
type uiConfig struct {
	addr, db, labels         string
	runs, rollouts, research []string
	edge                     httpedge.Edge
}

// startUI opens what c names and listens on c.addr; the returned func
// serves until its context ends and then closes what it opened.
func startUI(cmd *cobra.Command, c uiConfig) (func(context.Context) error, error) {
	o := &ui.Options{Rollouts: c.rollouts, Research: c.research, Edge: c.edge, Logger: logger(cmd)}
	var closers []func() error
	closeAll := func() error {
		var errs []error
		for _, f := range closers {
			errs = append(errs, f())
		}
		return errors.Join(errs...)
	}
	if len(c.runs) > 0 {
		o.Runs = bench.NewViewSource(c.runs, nil)
	}
	if c.db != "" {
		d, err := store.OpenReadOnly(c.db)
		if err != nil {
			return nil, err
		}
		closers = append(closers, d.Close)
		o.Sessions = d
	}
	if c.labels != "" {
		l, err := labels.Open(c.labels)
		if err != nil {
			return nil, errors.Join(err, closeAll())
		}
		closers = append(closers, l.Close)
		o.Labels = l
	}
	s, err := ui.New(o)
	if err != nil {
		return nil, errors.Join(err, closeAll())
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return nil, errors.Join(err, closeAll())
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "agentworld ui on http://%s\n", ln.Addr())
	return func(ctx context.Context) error { return errors.Join(s.Serve(ctx, ln), closeAll()) }, nil
}
