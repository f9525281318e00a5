// Package cli wires the agentworld command tree. Each command group lives in
// its own file and only translates flags into calls of the internal packages.
//
// Size: over 3,000 lines because it holds the flags, help text and output
// of every command (about fifty), one file per command group, and no
// logic: splitting it would make a package per command group that still
// shares the root's flag helpers, output writers and logger, with nothing
// gained for a reader, who opens one command's file.
package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/envconfig"
)

// New builds the root command with every command group attached.
func New() *cobra.Command {
	root := &cobra.Command{
		Use:           "agentworld",
		Short:         "Language world models as environments: simulate, benchmark, build data",
		SilenceUsage:  true,
		SilenceErrors: true,
		// One logger per command run, built before it runs, so every part
		// of the command logs through the same handler and level.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(cmd)
			if err != nil {
				return err
			}
			cmd.SetContext(context.WithValue(cmd.Context(), loggerKey{}, log))
			return checkFlagFloors(cmd)
		},
	}
	root.PersistentFlags().String("log-level", "info", "log level: debug, info, warn, error")
	root.SetUsageFunc(usageFunc(root.UsageFunc()))
	root.AddCommand(
		newVersionCmd(),
		newWorldCmd(),
		newMCPCmd(),
		newRealenvCmd(),
		newVerifyCmd(),
		newDataCmd(),
		newBenchCmd(),
		newRewardCmd(),
		newServeCmd(),
		newPlayCmd(),
		newRolloutCmd(),
		newUICmd(),
		newTemplateCmd(),
		newResearchCmd(),
	)
	return root
}

// usageFunc prints cobra's usage (def, the root's before it is replaced)
// followed by the environment variables a command reads and its manual
// page. It is a function, not a usage template: executing a text/template
// (cobra's own, once one is set) makes the linker keep every exported
// method of every type in the binary, about 6 MB of it (perf/binsize.sh).
func usageFunc(def func(*cobra.Command) error) func(*cobra.Command) error {
	return func(c *cobra.Command) error {
		if err := def(c); err != nil {
			return err
		}
		w := c.OutOrStderr()
		if env := envHelp(c); env != "" {
			fmt.Fprintf(w, "\n%s", env)
		}
		if page := docPage(c); page != "" {
			fmt.Fprintf(w, "\nManual: %s (in the agentworld repository)\n", page)
		}
		return nil
	}
}

type loggerKey struct{}

// logger returns the command's logger (see New's PersistentPreRunE). Logs go
// to stderr so stdout stays clean for data and reports.
func logger(cmd *cobra.Command) *slog.Logger {
	if ctx := cmd.Context(); ctx != nil {
		if log, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
			return log
		}
	}
	log, _ := newLogger(cmd)
	return log
}

// newLogger builds a logger honouring --log-level.
func newLogger(cmd *cobra.Command) (*slog.Logger, error) {
	lvl := slog.LevelInfo
	var err error
	if f := cmd.Flag("log-level"); f != nil {
		if e := lvl.UnmarshalText([]byte(f.Value.String())); e != nil {
			err = fmt.Errorf("--log-level %q: want debug, info, warn or error", f.Value.String())
		}
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})), err
}

// envAnnotation is the command annotation listing the environment
// variables (by name, space-separated) a command reads.
const envAnnotation = "agentworld-env"

// usesEnv records that cmd reads vars, for its help text.
func usesEnv(cmd *cobra.Command, vars ...envconfig.Var) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	names := strings.Fields(cmd.Annotations[envAnnotation])
	for _, v := range vars {
		if !slices.Contains(names, v.Name) {
			names = append(names, v.Name)
		}
	}
	cmd.Annotations[envAnnotation] = strings.Join(names, " ")
}

// envHelp is the "Environment variables" section of cmd's help: names and
// descriptions from the registry, never values.
func envHelp(cmd *cobra.Command) string {
	var vars []envconfig.Var
	for _, n := range strings.Fields(cmd.Annotations[envAnnotation]) {
		if v, ok := envconfig.Lookup(n); ok {
			vars = append(vars, v)
		}
	}
	return envconfig.Help(vars...)
}

// flagErr names the flag whose value err rejects: library errors name
// their own settings, never the command line's spelling of them.
func flagErr(flag string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("--%s: %w", flag, err)
}
