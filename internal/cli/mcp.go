package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/mcpworld"
	"github.com/agentworld/agentworld/internal/worldhooks"
)

func newMCPCmd() *cobra.Command {
	var (
		f             simFlags
		seed          int64
		perturbations string
	)
	cmd := &cobra.Command{
		Use:   "mcp WORLD",
		Short: "Serve one simulated world as an MCP server over stdio (for MCP clients that launch servers)",
		Long: `Serve WORLD (an MCP, search or swe world) as an MCP server on stdin/stdout:
tools/list answers the world's tool definitions and every tools/call is a
step of one simulator session, simulated with the same flags as serve (by
default the embedded replay). Logs go to stderr; stdout carries only MCP
messages. Configure it in an MCP client as the command
"agentworld mcp WORLD --model http://host:8000/v1".`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var so mcpworld.SessionOptions
			if cmd.Flags().Changed("seed") {
				so.Seed = &seed
			}
			if perturbations != "" {
				raw, err := os.ReadFile(perturbations)
				if err != nil {
					return fmt.Errorf("--perturbations: %w", err)
				}
				js, err := yaml.YAMLToJSON(raw)
				if err != nil {
					return fmt.Errorf("--perturbations %s: %w", perturbations, err)
				}
				so.Params = map[string]json.RawMessage{worldhooks.ParamPerturbations: js}
			}
			a, err := f.app(cmd)
			if err != nil {
				return err
			}
			defer closeApp(a)
			return a.MCP.ServeStdio(ctx, args[0], so, mcpStdin{cmd.InOrStdin()}, mcpStdout{cmd.OutOrStdout()})
		},
	}
	f.register(cmd)
	cmd.Flags().Int64Var(&seed, "seed", 0, "session seed (perturbation draws)")
	cmd.Flags().StringVar(&perturbations, "perturbations", "", "YAML/JSON perturbations section overriding the world's rules by name for this session")
	return cmd
}

// mcpStdin and mcpStdout give the command's streams the Close methods the
// MCP transport wants; closing them leaves the process's stdio alone.
type mcpStdin struct{ io.Reader }

func (mcpStdin) Close() error { return nil }

type mcpStdout struct{ io.Writer }

func (mcpStdout) Close() error { return nil }
