package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/library"
)

// libFilterFlags are the filters of world list / show / sample.
type libFilterFlags struct {
	f    library.Filter
	tags string
}

func (lf *libFilterFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&lf.f.Domain, "domain", "", "only this domain (mcp, search, terminal, swe, android, web, os)")
	fl.StringVar(&lf.tags, "tags", "", "only entries carrying all these tags (comma-separated)")
	fl.StringVar(&lf.f.Difficulty, "difficulty", "", "only tasks of this difficulty (easy, medium, hard)")
	fl.StringVar(&lf.f.Source, "source", "", "only entries made this way (seed, mcp, mixture, fiction, hand)")
	fl.StringVar(&lf.f.Model, "model", "", "only entries made by this generator model")
	fl.StringVar(&lf.f.Parent, "parent", "", "only entries derived from this parent (a seed id, an imported world, a task's world)")
	fl.StringVar(&lf.f.World, "world", "", "only this world and its tasks")
}

func (lf *libFilterFlags) filter() library.Filter {
	f := lf.f
	for t := range strings.SplitSeq(lf.tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			f.Tags = append(f.Tags, t)
		}
	}
	return f
}

// libKind reads --kind.
func libKind(kind string) (worlds, tasks bool, err error) {
	switch kind {
	case "worlds":
		return true, false, nil
	case "tasks":
		return false, true, nil
	case "all", "":
		return true, true, nil
	}
	return false, false, flagErr("kind", fmt.Errorf("%q: want worlds, tasks or all", kind))
}

func newWorldListCmd() *cobra.Command {
	var (
		lf     libFilterFlags
		kind   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "list LIB",
		Short: "List the worlds and tasks of a world library, with filters",
		Long: `Print one line per world (name, domain, tags, provenance) and per task
(id, world, difficulty, instruction) of the library LIB that passes the
filters, then the counts. --json prints the stored entries instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, ts, err := libKind(kind)
			if err != nil {
				return err
			}
			lib, err := library.Open(args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			enc := json.NewEncoder(w)
			f := lf.filter()
			nw, nt := 0, 0
			if ws {
				err := lib.Worlds(f, func(e *library.WorldEntry) error {
					nw++
					if asJSON {
						return enc.Encode(e)
					}
					p := e.Provenance
					_, err := fmt.Fprintf(w, "world %s\t%s\ttags=%s\tsource=%s model=%s seed=%d parent=%s\n", e.Spec.Name, e.Spec.Domain, strings.Join(e.Tags, ","), p.Source, p.Model, p.Seed, p.Parent)
					return err
				})
				if err != nil {
					return err
				}
			}
			if ts {
				err := lib.Tasks(f, func(t *library.TaskEntry, domain string) error {
					nt++
					if asJSON {
						return enc.Encode(t)
					}
					_, err := fmt.Fprintf(w, "task %s\t%s\t%s\t%s\t%s\n", t.ID, t.World, domain, t.Difficulty, clipLine(t.Instruction, 80))
					return err
				})
				if err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d worlds, %d tasks\n", nw, nt)
			return nil
		},
	}
	lf.register(cmd)
	cmd.Flags().StringVar(&kind, "kind", "all", "what to list: worlds, tasks or all")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the stored entries as JSON lines")
	return cmd
}

func clipLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

var errNotInLibrary = errors.New("not in the library")

func newWorldShowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show LIB NAME",
		Short: "Print one world (with its tasks) or one task of a world library as JSON",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			lib, err := library.Open(args[0])
			if err != nil {
				return err
			}
			name := args[1]
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			var found *library.WorldEntry
			if err := lib.Worlds(library.Filter{World: name}, func(e *library.WorldEntry) error {
				found = e
				return library.ErrStop
			}); err != nil {
				return err
			}
			if found != nil {
				var tasks []*library.TaskEntry
				if err := lib.Tasks(library.Filter{World: name}, func(t *library.TaskEntry, _ string) error {
					tasks = append(tasks, t)
					return nil
				}); err != nil {
					return err
				}
				return enc.Encode(struct {
					*library.WorldEntry
					Tasks []*library.TaskEntry `json:"tasks"`
				}{found, tasks})
			}
			var task *library.TaskEntry
			if err := lib.Tasks(library.Filter{}, func(t *library.TaskEntry, _ string) error {
				if t.ID == name {
					task = t
					return library.ErrStop
				}
				return nil
			}); err != nil {
				return err
			}
			if task == nil {
				return fmt.Errorf("%s: %q: %w (neither a world nor a task)", args[0], name, errNotInLibrary)
			}
			return enc.Encode(task)
		},
	}
	return cmd
}

func newWorldSampleCmd() *cobra.Command {
	var (
		lf   libFilterFlags
		kind string
		n    int
		seed int64
	)
	cmd := &cobra.Command{
		Use:   "sample LIB",
		Short: "Draw N worlds or tasks of a world library at random (seeded), as JSON lines",
		Long: `Draw --n entries uniformly from those that pass the filters, the same
ones for the same --seed, holding only N in memory whatever the library's
size. --kind tasks prints rollout task rows ({"id", "world",
"instruction", "max_turns"}, each in the task's own world), ready for
"agentworld rollout --tasks FILE --worlds LIB".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lib, err := library.Open(args[0])
			if err != nil {
				return err
			}
			if n <= 0 {
				return flagErr("n", fmt.Errorf("%d: want at least 1", n))
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			f := lf.filter()
			switch kind {
			case "worlds":
				s := library.NewSample[*library.WorldEntry](n, seed)
				if err := lib.Worlds(f, func(e *library.WorldEntry) error { s.Offer(e); return nil }); err != nil {
					return err
				}
				for _, e := range s.Out {
					if err := enc.Encode(e); err != nil {
						return err
					}
				}
			case "tasks":
				type row struct {
					ID          string `json:"id"`
					World       string `json:"world"`
					Instruction string `json:"instruction,omitempty"`
					MaxTurns    int    `json:"max_turns,omitempty"`
				}
				s := library.NewSample[row](n, seed)
				if err := lib.Tasks(f, func(t *library.TaskEntry, _ string) error {
					s.Offer(row{ID: t.ID, World: t.ID, Instruction: t.Instruction, MaxTurns: t.MaxTurns})
					return nil
				}); err != nil {
					return err
				}
				for _, r := range s.Out {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
			default:
				return flagErr("kind", fmt.Errorf("%q: want worlds or tasks", kind))
			}
			return nil
		},
	}
	lf.register(cmd)
	cmd.Flags().StringVar(&kind, "kind", "tasks", "what to draw: worlds or tasks")
	cmd.Flags().IntVarP(&n, "n", "n", 10, "how many to draw")
	cmd.Flags().Int64Var(&seed, "seed", 1, "random seed of the draw")
	return cmd
}
