package realenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/mcpclient"
	"github.com/agentworld/agentworld/internal/sandbox"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// MCPOptions configure a real MCP environment.
type MCPOptions struct {
	// Command is the server's argv (e.g. node, path/to/index.js); required.
	Command []string
	// Env is added to the server's environment (KEY=VALUE); nil adds nothing.
	Env []string
	// Dir is the server's working directory; "" means the current one.
	Dir string
	// TaskDescription becomes the task_description component; "" means a
	// description naming the server.
	TaskDescription string
	// CallTimeout bounds one tool call; a server that does not answer in
	// time is treated as broken. 0 means 60 seconds.
	CallTimeout time.Duration
	// StartTimeout bounds start-up (initialize and tools/list); 0 means 30
	// seconds.
	StartTimeout time.Duration
	// Logger receives lifecycle logs; nil discards them.
	Logger *slog.Logger
}

// MCPEnv is a real MCP server spoken to over stdio with the official Go SDK
// client. Each tool call is one step. The server's tool definitions are the
// action space.
type MCPEnv struct {
	opts MCPOptions
	log  *slog.Logger

	mu      sync.Mutex
	session *mcpclient.Session
	tools   []*mcp.Tool
	server  string
	started bool
	broken  bool
	closed  bool
	comps   trajectory.Components
}

// NewMCP prepares an MCP environment; Start launches the server.
func NewMCP(opts *MCPOptions) (*MCPEnv, error) {
	var o MCPOptions
	if opts != nil {
		o = *opts
	}
	if len(o.Command) == 0 || o.Command[0] == "" {
		return nil, errors.New("mcp environment: no server command")
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 60 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &MCPEnv{opts: o, log: o.Logger}, nil
}

// Domain is the MCP domain.
func (m *MCPEnv) Domain() domain.Domain { return domain.MCP }

// Start launches the server, initializes the MCP session and lists the
// tools. The first observation names the server and its tools.
func (m *MCPEnv) Start(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return "", errors.New("mcp environment already started")
	}
	m.started = true
	sctx, cancel := context.WithTimeout(ctx, m.opts.StartTimeout)
	defer cancel()
	cs, err := mcpclient.Start(sctx, m.opts.Command, &mcpclient.Options{
		Env: m.opts.Env, Dir: m.opts.Dir,
		StartTimeout: m.opts.StartTimeout, CallTimeout: m.opts.CallTimeout,
		ClientName: "agentworld-realenv", Logger: m.log,
	})
	if err != nil {
		return "", fmt.Errorf("%w: %v", sandbox.ErrUnavailable, err)
	}
	m.session = cs
	if m.tools, err = cs.Tools(sctx); err != nil {
		_ = cs.Close()
		return "", err
	}
	m.server = cs.ServerName()
	m.comps = m.components()
	names := make([]string, len(m.tools))
	for i, t := range m.tools {
		names[i] = t.Name
	}
	m.log.Debug("mcp server started", "server", m.server, "tools", len(m.tools))
	return fmt.Sprintf("Connected to MCP server %s with %d tools: %s", m.serverName(), len(m.tools), strings.Join(names, ", ")), nil
}

func (m *MCPEnv) serverName() string {
	if m.server != "" {
		return m.server
	}
	return strings.Join(m.opts.Command, " ")
}

// Tools returns the server's tool definitions as listed at start.
func (m *MCPEnv) Tools() []*mcp.Tool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*mcp.Tool(nil), m.tools...)
}

// Broken reports whether the server died.
func (m *MCPEnv) Broken() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.broken
}

// Step calls one tool. The observation is the tool result in MCP's wire
// shape ({"content": [...], "structuredContent": …, "isError": …}); an MCP
// protocol error (unknown tool, invalid arguments) is the observation
// {"error": {"code", "message"}}, as a client would see it; both rendered by
// mcpclient, like the simulator's observations of MCP worlds. A server that
// crashes or stops answering gives an error observation and marks the
// environment broken; later steps return ErrBroken.
func (m *MCPEnv) Step(ctx context.Context, action string) (StepResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	begin := time.Now()
	if !m.started || m.closed || m.session == nil {
		return StepResult{}, errors.New("mcp environment not running")
	}
	if m.broken {
		return StepResult{}, ErrBroken
	}
	call, err := conversation.ParseToolCall(action)
	if err != nil {
		return StepResult{}, err
	}
	obs, err := mcpclient.Observation(m.session.CallTool(ctx, call.Name, call.Arguments))
	if err != nil {
		if ctx.Err() != nil {
			return StepResult{}, ctx.Err()
		}
		m.broken = true
		cause := m.session.WithStderr(err).Error()
		m.log.Warn("mcp server broken", "server", m.serverName(), "err", cause)
		return StepResult{
			Observation: mcpclient.RenderError(jsonrpc.CodeInternalError, "MCP server unavailable: "+err.Error()),
			Broken:      true,
			Error:       cause,
			Latency:     time.Since(begin),
		}, nil
	}
	return StepResult{Observation: obs, Latency: time.Since(begin)}, nil
}

// Components describe the server for the world model; the action space is
// the server's tool definitions as JSON.
func (m *MCPEnv) Components() trajectory.Components {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.comps
}

func (m *MCPEnv) components() trajectory.Components {
	desc := m.opts.TaskDescription
	if strings.TrimSpace(desc) == "" {
		desc = "The MCP server " + m.serverName() + ", called by an agent through the Model Context Protocol."
	}
	return trajectory.Components{
		TaskDescription: desc,
		ActionSpace:     ToolsJSON(m.tools),
		InitialState:    "A fresh server process; no tool has been called yet.",
	}
}

// ToolsJSON renders tool definitions as an indented JSON array in MCP's
// shape (name, description, inputSchema, …), the form world specs read.
func ToolsJSON(tools []*mcp.Tool) string {
	if len(tools) == 0 {
		return "[]"
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return "[]"
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return string(b)
	}
	return buf.String()
}

// Close ends the MCP session and stops the server process.
func (m *MCPEnv) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.session == nil {
		return nil
	}
	err := m.session.Close()
	if m.broken {
		return nil // the server is already gone; its exit status is the crash
	}
	return err
}
