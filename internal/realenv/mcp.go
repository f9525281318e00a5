package realenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/domain"
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
	// Logger receives lifecycle logs; nil means slog.Default().
	Logger *slog.Logger
}

// MCPEnv is a real MCP server spoken to over stdio with the official Go SDK
// client. Each tool call is one step. The server's tool definitions are the
// action space.
type MCPEnv struct {
	opts MCPOptions
	log  *slog.Logger

	mu      sync.Mutex
	cmd     *exec.Cmd
	stderr  *boundedBuffer
	session *mcp.ClientSession
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
		o.Logger = slog.Default()
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
	if _, err := exec.LookPath(m.opts.Command[0]); err != nil {
		return "", fmt.Errorf("%w: MCP server command %q: %v", ErrUnavailable, m.opts.Command[0], err)
	}
	cmd := exec.Command(m.opts.Command[0], m.opts.Command[1:]...)
	cmd.Env = append(os.Environ(), m.opts.Env...)
	cmd.Dir = m.opts.Dir
	m.stderr = &boundedBuffer{max: 64 << 10}
	cmd.Stderr = m.stderr
	m.cmd = cmd
	client := mcp.NewClient(&mcp.Implementation{Name: "agentworld-realenv", Version: "1"}, nil)
	sctx, cancel := context.WithTimeout(ctx, m.opts.StartTimeout)
	defer cancel()
	cs, err := client.Connect(sctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return "", fmt.Errorf("%w: connect to MCP server %s: %v: %s", ErrUnavailable, strings.Join(m.opts.Command, " "), err, strings.TrimSpace(m.stderr.String()))
	}
	m.session = cs
	for tool, err := range cs.Tools(sctx, nil) {
		if err != nil {
			_ = cs.Close()
			return "", fmt.Errorf("mcp tools/list: %w", err)
		}
		m.tools = append(m.tools, tool)
	}
	if ir := cs.InitializeResult(); ir != nil && ir.ServerInfo != nil {
		m.server = strings.TrimSpace(ir.ServerInfo.Name + " " + ir.ServerInfo.Version)
	}
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
// shape ({"content": [...], "isError": …, "structuredContent": …}); an MCP
// protocol error (unknown tool, invalid arguments) is the observation
// {"error": {"code", "message"}}, as a client would see it. A server that
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
	call, err := ParseMCPAction(action)
	if err != nil {
		return StepResult{}, err
	}
	params := &mcp.CallToolParams{Name: call.Name}
	if len(call.Arguments) > 0 {
		params.Arguments = call.Arguments
	}
	cctx, cancel := context.WithTimeout(ctx, m.opts.CallTimeout)
	res, err := m.session.CallTool(cctx, params)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return StepResult{}, ctx.Err()
		}
		var werr *jsonrpc.Error
		if errors.As(err, &werr) {
			return StepResult{Observation: RenderMCPError(werr.Code, werr.Message), Latency: time.Since(begin)}, nil
		}
		m.broken = true
		cause := err.Error()
		if s := strings.TrimSpace(m.stderr.String()); s != "" {
			cause += "; server stderr: " + tail(s, 2000)
		}
		m.log.Warn("mcp server broken", "server", m.serverName(), "err", cause)
		return StepResult{
			Observation: RenderMCPError(jsonrpc.CodeInternalError, "MCP server unavailable: "+err.Error()),
			Broken:      true,
			Error:       cause,
			Latency:     time.Since(begin),
		}, nil
	}
	obs, err := RenderToolResult(res)
	if err != nil {
		return StepResult{}, fmt.Errorf("render tool result of %s: %w", call.Name, err)
	}
	return StepResult{Observation: obs, Latency: time.Since(begin)}, nil
}

// RenderToolResult writes a tool result as the observation text: MCP's wire
// JSON, keys in the SDK's fixed order, no HTML escaping.
func RenderToolResult(res *mcp.CallToolResult) (string, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return "", err
	}
	return reencode(b)
}

// RenderMCPError writes a protocol-level error as the observation text.
func RenderMCPError(code int64, message string) string {
	b, _ := trajectory.Marshal(map[string]any{"error": map[string]any{"code": code, "message": message}})
	return string(b)
}

// reencode re-marshals JSON without HTML escaping so '<', '>' and '&' in
// tool output stay as the server wrote them.
func reencode(b []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	out, err := trajectory.Marshal(v)
	return string(out), err
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
	if m.session != nil {
		err := m.session.Close()
		if m.broken {
			return nil // the server is already gone; its exit status is the crash
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil // killed on close after stdin closed
		}
		return err
	}
	return nil
}

// boundedBuffer keeps the last max bytes written (server stderr).
type boundedBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = append([]byte(nil), w.b[len(w.b)-w.max:]...)
	}
	return len(p), nil
}

func (w *boundedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
