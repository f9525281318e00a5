package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/examples"
	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/mcpworld"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/world"
)

func newWorldCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "world",
		Short: "Build and inspect world specs: import from a real MCP server, check a fictional world's ledger, browse a generated world library",
	}
	cmd.AddCommand(newWorldFromMCPCmd(), newWorldCheckCmd(), newWorldListCmd(), newWorldShowCmd(), newWorldSampleCmd(), newWorldGenerateCmd())
	return cmd
}

func newWorldFromMCPCmd() *cobra.Command {
	var (
		out, name string
		calls     []string
		env       []string
	)
	cmd := &cobra.Command{
		Use:   "from-mcp [flags] -- CMD [ARGS...]",
		Short: "Write a world spec for a real MCP server: its tools, and optionally a few recorded calls as demonstrations",
		Example: `  agentworld world from-mcp -o memory.yaml -- npx @modelcontextprotocol/server-memory
  agentworld world from-mcp --call 'echo {"message":"hi"}' -- node server.js stdio`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := &mcpworld.ImportOptions{Name: name, Env: env, Stderr: cmd.ErrOrStderr(), Logger: logger(cmd)}
			for _, c := range calls {
				call, err := conversation.ParseToolCallLine(c)
				if err != nil {
					return fmt.Errorf("--call %q: %w", c, err)
				}
				opts.Calls = append(opts.Calls, call)
			}
			spec, err := mcpworld.Import(cmd.Context(), args, opts)
			if err != nil {
				return err
			}
			y, err := mcpworld.MarshalSpecYAML(spec)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(y)
				return err
			}
			if err := atomicfile.WriteFile(out, y, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: world %q, %d tools, %d demonstrations\n", out, spec.Name, len(spec.ActionSpace.Tools), len(spec.Demonstrations))
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "spec file to write (default stdout)")
	cmd.Flags().StringVar(&name, "name", "", "world name (default: the server's name)")
	cmd.Flags().StringArrayVar(&calls, "call", nil, "record a real call as a demonstration: 'TOOL {\"arg\": 1}' (repeatable)")
	cmd.Flags().StringArrayVar(&env, "env", nil, "KEY=VALUE added to the server's environment (repeatable)")
	return cmd
}

// errContradictions makes `world check` exit non-zero when it finds any.
var errContradictions = errors.New("contradictions found")

func newWorldCheckCmd() *cobra.Command {
	var (
		ledgerDir, worldsDir, dbPath string
		asJSON, all                  bool
	)
	cmd := &cobra.Command{
		Use:   "check WORLD | --all --worlds DIR|LIB",
		Short: "Report contradictions in a world's ledger: an entity attribute one session or the spec's facts set and another session changed",
		Long: `WORLD is a spec file or the name of a world in --worlds (a directory of
specs or a world library) or a bundled world. The ledger (kept in the
session database of serve, --db) holds the facts the simulator asserted
in observations of that world; a value that one session (or the spec's
facts section) established and another session then contradicted is
reported, with the contradiction rate: contradictions per fact the
simulator asserted. --all checks every world of --worlds that has a facts
section (the fictional worlds "world generate" makes) and prints each
world's rate and the overall one. Exits with status 1 when any
contradiction is found.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if all {
				if len(args) != 0 || worldsDir == "" {
					return errors.New("--all takes no WORLD and needs --worlds")
				}
				return nil
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			type target struct {
				name  string
				canon *fiction.Facts
			}
			var targets []target
			known := true
			if all {
				specs, err := loadWorldsDir(worldsDir)
				if err != nil {
					return err
				}
				for _, name := range slices.Sorted(maps.Keys(specs)) {
					if specs[name].Facts != nil {
						targets = append(targets, target{name, specs[name].Facts})
					}
				}
			} else {
				name, canon, ok, err := resolveWorldFacts(args[0], worldsDir)
				if err != nil {
					return err
				}
				targets, known = append(targets, target{name, canon}), ok
			}
			var facts fiction.Store
			if ledgerDir != "" {
				// Reading must not create: a mistyped directory would
				// otherwise report every world clean (no facts, rate n/a),
				// as a missing --db is refused below.
				if st, err := os.Stat(ledgerDir); err != nil || !st.IsDir() {
					if err == nil {
						err = errors.New("not a directory")
					}
					return flagErr("ledger", fmt.Errorf("ledger directory %s: %w", ledgerDir, err))
				}
				fs, err := fiction.NewFileStore(ledgerDir, logger(cmd))
				if err != nil {
					return err
				}
				facts = fs
			} else {
				if _, err := os.Stat(dbPath); err != nil {
					return fmt.Errorf("session database %s: %w (give --db, the file serve used)", dbPath, err)
				}
				db, err := store.OpenReadOnly(dbPath)
				if err != nil {
					return err
				}
				defer db.Close()
				facts = db
			}
			ledger := fiction.NewLedger(facts, nil)
			w := cmd.OutOrStdout()
			enc := json.NewEncoder(w)
			total, asserted := 0, 0
			for _, tg := range targets {
				fs, err := facts.WorldFacts(cmd.Context(), tg.name)
				if err != nil {
					return err
				}
				if !known && len(fs) == 0 {
					// A name no spec has and no ledger holds is a typo, not
					// a world without contradictions.
					return fmt.Errorf("world %q: no spec of that name (a spec file, --worlds DIR or a bundled world) and no facts in its ledger", tg.name)
				}
				cs, err := ledger.Contradictions(cmd.Context(), tg.name, tg.canon)
				if err != nil {
					return err
				}
				n := 0
				for _, f := range fs {
					if f.Source == fiction.SourceObservation {
						n++
					}
				}
				total += len(cs)
				asserted += n
				if asJSON {
					for _, c := range cs {
						if err := enc.Encode(c); err != nil {
							return err
						}
					}
					continue
				}
				for _, c := range cs {
					fmt.Fprintln(w, c.String())
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "world %s: %d contradictions in %d asserted facts (rate %s)\n", tg.name, len(cs), n, contradictionRate(len(cs), n))
			}
			if all && !asJSON {
				fmt.Fprintf(cmd.ErrOrStderr(), "%d worlds with facts: %d contradictions in %d asserted facts (rate %s)\n", len(targets), total, asserted, contradictionRate(total, asserted))
			}
			if total > 0 {
				if len(targets) == 1 {
					return fmt.Errorf("world %s: %w (%d)", targets[0].name, errContradictions, total)
				}
				return fmt.Errorf("%w (%d in %d worlds)", errContradictions, total, len(targets))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dbPath, "db", app.DefaultDBPath(), "session database holding the world ledgers (serve's --db)")
	cmd.Flags().StringVar(&ledgerDir, "ledger", "", "read ledgers from a directory of <world>.facts.jsonl files instead of --db")
	cmd.Flags().StringVar(&worldsDir, "worlds", "", "directory of world specs or a world library, to find WORLD by name and read its facts")
	cmd.Flags().BoolVar(&all, "all", false, "check every world of --worlds that has a facts section")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per contradiction")
	return cmd
}

// contradictionRate formats contradictions per asserted fact ("n/a" when
// none was asserted).
func contradictionRate(c, n int) string {
	if n == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.4f", float64(c)/float64(n))
}

// loadWorldsDir loads a directory of spec files or a world library.
func loadWorldsDir(dir string) (map[string]*world.Spec, error) {
	if library.IsLibrary(dir) {
		lib, err := library.Open(dir)
		if err != nil {
			return nil, err
		}
		out := map[string]*world.Spec{}
		err = lib.Worlds(library.Filter{}, func(e *library.WorldEntry) error {
			if _, dup := out[e.Spec.Name]; !dup {
				out[e.Spec.Name] = e.Spec
			}
			return nil
		})
		return out, err
	}
	return world.LoadDir(dir)
}

// resolveWorldFacts finds the world's name and canonical facts: WORLD as a
// spec file, else as a name in worldsDir, else as a bundled world, else a
// bare name without canon (known false: only its ledger can vouch for it).
func resolveWorldFacts(arg, worldsDir string) (name string, canon *fiction.Facts, known bool, err error) {
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		s, err := world.Load(arg)
		if err != nil {
			return "", nil, false, err
		}
		return s.Name, s.Facts, true, nil
	}
	if worldsDir != "" {
		specs, err := loadWorldsDir(worldsDir)
		if err != nil {
			return "", nil, false, err
		}
		if s, ok := specs[arg]; ok {
			return s.Name, s.Facts, true, nil
		}
		return "", nil, false, fmt.Errorf("world %q: no spec of that name in %s", arg, worldsDir)
	}
	bundled, err := world.LoadFS(examples.FS, "worlds")
	if err != nil {
		return "", nil, false, err
	}
	if s, ok := bundled[arg]; ok {
		return s.Name, s.Facts, true, nil
	}
	return arg, nil, false, nil
}
