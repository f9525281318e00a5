package mcpworld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/mcpclient"
	"github.com/agentworld/agentworld/internal/world"
)

// ImportOptions tunes Import; nil means defaults.
type ImportOptions struct {
	// Name is the world's name; "" means the server's reported name.
	Name string
	// Calls are made against the real server after listing its tools and
	// recorded as demonstrations, in order; nil records none.
	Calls []conversation.ToolCall
	// Env is added to the server's environment (KEY=VALUE).
	Env []string
	// Dir is the server's working directory; "" means the current one.
	Dir string
	// Timeout bounds the whole import; zero means 60 seconds.
	Timeout time.Duration
	// Stderr receives the server's stderr; nil discards it.
	Stderr io.Writer
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Import starts the MCP server argv over stdio with the official Go SDK
// client, lists its tools, makes the requested calls and returns a world
// spec of the MCP domain describing it.
func Import(ctx context.Context, argv []string, opts *ImportOptions) (*world.Spec, error) {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("from-mcp: no server command given (usage: from-mcp -- CMD ARGS…)")
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cs, err := mcpclient.Start(ctx, argv, &mcpclient.Options{
		Env: o.Env, Dir: o.Dir, Stderr: o.Stderr,
		StartTimeout: o.Timeout, CallTimeout: o.Timeout,
		ClientName: "agentworld-import", Logger: o.Logger,
	})
	if err != nil {
		return nil, err
	}
	defer cs.Close()

	spec := &world.Spec{Domain: domain.MCP, Name: o.Name}
	server, instructions := cs.ServerName(), ""
	if ir := cs.InitializeResult(); ir != nil {
		if ir.ServerInfo != nil && spec.Name == "" {
			spec.Name = ir.ServerInfo.Name
		}
		instructions = strings.TrimSpace(ir.Instructions)
	}
	if spec.Name == "" {
		spec.Name = "imported-mcp"
	}
	tools, err := cs.Tools(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		wt, err := ToolFromMCP(t)
		if err != nil {
			return nil, err
		}
		spec.ActionSpace.Tools = append(spec.ActionSpace.Tools, wt)
	}
	o.Logger.Info("listed tools", "server", server, "tools", len(spec.ActionSpace.Tools))
	if len(spec.ActionSpace.Tools) == 0 {
		return nil, fmt.Errorf("MCP server %s lists no tools: nothing to simulate", server)
	}
	spec.Description = "Simulation of the MCP server " + server + " (imported from the real server)."
	spec.TaskDescription = fmt.Sprintf("The environment is the MCP server %s. An agent calls its tools; each call's result "+
		"is returned in MCP's wire shape (a JSON object with a content list, structuredContent when the tool declares an "+
		"output schema, and isError for failed calls).", server)
	if instructions != "" {
		spec.TaskDescription += "\n\nThe server describes itself as follows:\n" + instructions
	}
	for i, c := range o.Calls {
		if _, ok := spec.ActionSpace.Tool(c.Name); !ok {
			return nil, fmt.Errorf("call %d: server %s has no tool %q", i+1, server, c.Name)
		}
		action, err := conversation.RenderToolCall(c.Name, c.Arguments)
		if err != nil {
			return nil, fmt.Errorf("call %d: %w", i+1, err)
		}
		obs, err := mcpclient.Observation(cs.CallTool(ctx, c.Name, c.Arguments))
		if err != nil {
			return nil, cs.WithStderr(fmt.Errorf("call %d (%s) on %s: %w", i+1, c.Name, server, err))
		}
		o.Logger.Info("recorded call", "n", i+1, "tool", c.Name, "bytes", len(obs))
		spec.Demonstrations = append(spec.Demonstrations, world.Demonstration{Action: action, Observation: obs})
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("imported spec: %w", err)
	}
	return spec, nil
}

// MarshalSpecYAML writes a spec as YAML in field order, multi-line strings
// in literal style, readable by world.Parse.
func MarshalSpecYAML(s *world.Spec) ([]byte, error) {
	js, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var v any
	if err := yaml.UnmarshalWithOptions(js, &v, yaml.UseOrderedMap()); err != nil {
		return nil, err
	}
	return yaml.MarshalWithOptions(v, yaml.UseLiteralStyleIfMultiline(true))
}
