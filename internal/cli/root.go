// Package cli wires the agentworld command tree. Each command group lives in
// its own file and only translates flags into calls of the internal packages.
package cli

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

// New builds the root command with every command group attached.
func New() *cobra.Command {
	root := &cobra.Command{
		Use:           "agentworld",
		Short:         "Language world models as environments: simulate, benchmark, build data",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("log-level", "info", "log level: debug, info, warn, error")
	root.AddCommand(
		newVersionCmd(),
		newWorldCmd(),
		newMCPCmd(),
		newRealenvCmd(),
		newVerifyCmd(),
		newDataCmd(),
		newBenchCmd(),
		newServeCmd(),
		newPlayCmd(),
	)
	return root
}

// logger returns the logger for a command, honouring --log-level. Logs go to
// stderr so stdout stays clean for data and reports.
func logger(cmd *cobra.Command) *slog.Logger {
	lvl := slog.LevelInfo
	if f := cmd.Flag("log-level"); f != nil {
		_ = lvl.UnmarshalText([]byte(f.Value.String()))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}
