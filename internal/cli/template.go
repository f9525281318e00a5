package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/promptlib"
)

// templateFlags select a world-model template version: --template names it
// in the library --template-dir opens.
type templateFlags struct {
	dir, ref string
}

func (t *templateFlags) register(cmd *cobra.Command, usage string) {
	cmd.Flags().StringVar(&t.ref, "template", "", usage)
	t.registerDir(cmd)
}

func (t *templateFlags) registerDir(cmd *cobra.Command) {
	cmd.Flags().StringVar(&t.dir, "template-dir", "", templateDirUsage)
}

const templateDirUsage = "template library directory (empty: only the built-in v0)"

func (t *templateFlags) library() (*promptlib.Library, error) {
	lib, err := promptlib.Open(t.dir)
	if err != nil {
		return nil, flagErr("template-dir", err)
	}
	return lib, nil
}

// version is the selected version.
func (t *templateFlags) version() (*promptlib.Version, error) {
	_, v, err := t.selected()
	return v, err
}

// selected is the library and the version selected in it.
func (t *templateFlags) selected() (*promptlib.Library, *promptlib.Version, error) {
	lib, err := t.library()
	if err != nil {
		return nil, nil, err
	}
	v, err := lib.Get(t.ref)
	if err != nil {
		return nil, nil, flagErr("template", err)
	}
	return lib, v, nil
}

const benchTemplateUsage = "world-model template version (a name like v3, or an id prefix) every row's system prompt is re-rendered under: its components are recovered from system_str and rendered with the version; empty: the rows' own system_str, or the promoted version when --template-dir has one"

// benchTemplate is the version bench rows are re-rendered under: --template,
// else the promoted version of a --template-dir that has one; nil (rows
// as published) otherwise.
func (t *templateFlags) benchTemplate() (*bench.Template, error) {
	if t.ref == "" {
		if t.dir == "" {
			return nil, nil
		}
		if _, err := os.Stat(filepath.Join(t.dir, promptlib.PromotedFile)); err != nil {
			return nil, nil
		}
	}
	lib, v, err := t.selected()
	if err != nil {
		return nil, err
	}
	return benchTemplateOf(lib, v), nil
}

// benchTemplateOf renders bench rows under v, recognising the prompts any
// version of lib rendered.
func benchTemplateOf(lib *promptlib.Library, v *promptlib.Version) *bench.Template {
	return &bench.Template{Name: v.Name, ID: v.ID, Render: promptlib.NewRerenderer(lib, v).Rerender}
}

func newTemplateCmd() *cobra.Command {
	var f templateFlags
	cmd := &cobra.Command{
		Use:   "template",
		Short: "List, show, diff and promote world-model system-prompt template versions",
		Long: `World-model system prompts are rendered from template versions. v0 is the
built-in templates; a library directory (--template-dir) holds the others,
one JSON file a version: its content-hash id, name, parent and rationale.
serve, bench, data and research select versions from the same library with
--template and --template-dir; data export draws them per stage from a
mixes file (template mixes checks one).`,
	}
	cmd.PersistentFlags().StringVar(&f.dir, "template-dir", "", templateDirUsage)
	cmd.AddCommand(&cobra.Command{
		Use: "list", Short: "List the versions", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lib, err := f.library()
			if err != nil {
				return err
			}
			prom, err := lib.Promoted()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, v := range lib.List() {
				mark := " "
				if v.ID == prom.ID {
					mark = "*"
				}
				parent := "-"
				if v.Parent != "" {
					parent = v.Parent[:12]
				}
				line := fmt.Sprintf("%s %-6s %s parent %s  %s", mark, v.Name, v.Short(), parent, firstLine(v.Rationale))
				fmt.Fprintln(w, strings.TrimRight(line, " "))
			}
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "show VERSION DOMAIN", Short: "Print a version's template of one domain", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			lib, err := f.library()
			if err != nil {
				return err
			}
			v, err := lib.Get(args[0])
			if err != nil {
				return err
			}
			d, err := domain.Parse(args[1])
			if err != nil {
				return err
			}
			src, ok := v.Templates[string(d)]
			if !ok {
				return fmt.Errorf("version %s has no template for domain %s", v.Name, d)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), src)
			return err
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use: "diff A B", Short: "Show the lines that differ between two versions", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			lib, err := f.library()
			if err != nil {
				return err
			}
			return printDiff(cmd, lib, args[0], args[1])
		},
	})
	cmd.AddCommand(newTemplateImportCmd(&f))
	cmd.AddCommand(&cobra.Command{
		Use: "promote VERSION", Short: "Make VERSION the one serve uses when --template is not given", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lib, err := f.library()
			if err != nil {
				return err
			}
			return promote(cmd, lib, args[0])
		},
	})
	check := &cobra.Command{
		Use: "mixes FILE", Short: "Check a YAML file of per-stage (cpt, sft, rl) weighted versions", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lib, err := f.library()
			if err != nil {
				return err
			}
			m, err := promptlib.LoadMixes(args[0], lib)
			if err != nil {
				return err
			}
			for _, s := range promptlib.Stages {
				es, _ := m.Stage(s)
				for _, e := range es {
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s (%s) weight %g\n", s, e.Resolved.Name, e.Resolved.Short(), e.Weight)
				}
			}
			return nil
		},
	}
	cmd.AddCommand(check)
	return cmd
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}

// printDiff prints how versions a and b of lib differ.
func printDiff(cmd *cobra.Command, lib *promptlib.Library, a, b string) error {
	va, err := lib.Get(a)
	if err != nil {
		return err
	}
	vb, err := lib.Get(b)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(cmd.OutOrStdout(), promptlib.Diff(va, vb))
	return err
}

// promote makes ref lib's default version and says so.
func promote(cmd *cobra.Command, lib *promptlib.Library, ref string) error {
	v, err := lib.Promote(ref)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "promoted %s (%s) in %s\n", v.Name, v.Short(), lib.Dir())
	return nil
}

func newTemplateImportCmd(f *templateFlags) *cobra.Command {
	var official, name string
	cmd := &cobra.Command{
		Use:   "import --official DIR --template-dir LIB [--name NAME]",
		Short: "Add the official world-model system prompts of a checkout as a version",
		Long: `Add the world-model system prompts of a checkout of the official
Qwen-AgentWorld repository (prompts/<domain>/system_prompt.txt; you clone it)
to the template library as a version named after the checkout's commit
(official-<commit>, or --name). Their {tool_definitions} and
{demonstrations} placeholders render a world's action space and
demonstrations; serve, bench, data and research then select it with
--template like any other version. The files' SHA-256 are printed, with a
warning when they differ from the pinned official commit's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if official == "" {
				return errors.New("missing required flag: --official")
			}
			if f.dir == "" {
				return errors.New("missing required flag: --template-dir (the library the version is added to)")
			}
			imp, err := promptlib.ImportOfficial(official, name)
			if err != nil {
				return err
			}
			lib, err := f.library()
			if err != nil {
				return err
			}
			v, err := lib.Add(imp.Version)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			paths := make([]string, 0, len(imp.Files))
			for p := range imp.Files {
				paths = append(paths, p)
			}
			slices.Sort(paths)
			for _, p := range paths {
				fmt.Fprintf(w, "sha256 %s  %s\n", imp.Files[p], p)
			}
			if len(imp.Unpinned) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d of %d files differ from the official commit %s (%s)\n", len(imp.Unpinned), len(imp.Files), promptlib.OfficialCommit, strings.Join(imp.Unpinned, ", "))
			}
			if v != imp.Version {
				fmt.Fprintf(w, "already in the library as %s (%s): same text\n", v.Name, v.Short())
				return nil
			}
			fmt.Fprintf(w, "added %s (%s): %s\n", v.Name, v.Short(), v.Rationale)
			return nil
		},
	}
	cmd.Flags().StringVar(&official, "official", "", "checkout of the official Qwen-AgentWorld repository")
	cmd.Flags().StringVar(&name, "name", "", "version name (default: official-<commit of the checkout>)")
	return cmd
}
