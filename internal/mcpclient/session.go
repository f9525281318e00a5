// Package mcpclient is agentworld's client side of the Model Context
// Protocol: it starts a real MCP server as a child process, holds an
// official go-sdk client session to it over stdio, and shuts it down without
// leaving a process or goroutine behind. It also owns the one rendering of
// what a client receives (tool results, protocol errors, injected faults) as
// observation text, so that observations recorded from real servers and
// those the simulator produces or learns from are byte-for-byte comparable.
package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure Start; nil means defaults.
type Options struct {
	// Env is added to the server's environment (KEY=VALUE); nil adds
	// nothing to the inherited environment.
	Env []string
	// Dir is the server's working directory; "" means the current one.
	Dir string
	// StartTimeout bounds starting the process and the MCP handshake; 0
	// means 30 seconds.
	StartTimeout time.Duration
	// CallTimeout bounds each request made after start (a whole tools/list,
	// one tools/call); 0 means 60 seconds.
	CallTimeout time.Duration
	// TerminateDuration is how long Close waits for the server to exit after
	// closing its stdin, and again after SIGTERM, before killing it; 0 means
	// 2 seconds.
	TerminateDuration time.Duration
	// Stderr also receives the server's stderr as it is written; nil means
	// stderr is only kept (its last StderrLimit bytes) for error messages.
	Stderr io.Writer
	// StderrLimit is how many trailing bytes of the server's stderr are kept;
	// 0 means 64 KiB.
	StderrLimit int
	// ClientName is the client name sent in initialize; "" means
	// "agentworld".
	ClientName string
	// Logger receives lifecycle logs; nil discards them.
	Logger *slog.Logger
}

// stderrInErrors is how much of the server's stderr an error message quotes.
const stderrInErrors = 2000

// Session is a running stdio MCP server and the client session to it. Its
// methods are safe for concurrent use as far as the SDK session is.
type Session struct {
	argv   []string
	o      Options
	log    *slog.Logger
	cmd    *exec.Cmd
	cs     *mcp.ClientSession
	stderr *TailBuffer

	closeOnce sync.Once
	closeErr  error
}

// Start launches argv as an MCP server speaking over stdin/stdout and
// completes the MCP handshake. The server runs in its own process group so
// Close can also stop any process it started; the terminal's Ctrl-C reaches
// agentworld, which then closes the session, not the server directly. On
// error nothing is left running and the message quotes the server's stderr.
func Start(ctx context.Context, argv []string, opts *Options) (*Session, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("start MCP server: no command given")
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 60 * time.Second
	}
	if o.TerminateDuration <= 0 {
		o.TerminateDuration = 2 * time.Second
	}
	if o.StderrLimit <= 0 {
		o.StderrLimit = 64 << 10
	}
	if o.ClientName == "" {
		o.ClientName = "agentworld"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Session{argv: append([]string(nil), argv...), o: o, log: o.Logger, stderr: NewTailBuffer(o.StderrLimit)}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.Dir = o.Dir
	cmd.Stderr = s.stderr
	if o.Stderr != nil {
		cmd.Stderr = io.MultiWriter(s.stderr, o.Stderr)
	}
	ownProcessGroup(cmd)
	// A descendant holding stdout or stderr open must not keep Wait (and the
	// goroutines copying those pipes) alive after the server itself exits;
	// half of TerminateDuration lets Wait return before the SDK's shutdown
	// gives up waiting and starts signalling a process that is gone.
	cmd.WaitDelay = o.TerminateDuration / 2
	s.cmd = cmd

	sctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: o.ClientName, Version: "1"}, nil)
	cs, err := client.Connect(sctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: o.TerminateDuration}, nil)
	if err != nil {
		// The SDK closes the connection when the handshake fails; whatever
		// the server started may still run.
		s.killGroup()
		return nil, s.WithStderr(fmt.Errorf("connect to MCP server %q: %w", s.commandLine(), err))
	}
	s.cs = cs
	s.log.Debug("mcp server started", "server", s.ServerName(), "pid", s.Pid())
	return s, nil
}

func (s *Session) commandLine() string { return strings.Join(s.argv, " ") }

// InitializeResult is what the server said about itself in the handshake;
// it may be nil.
func (s *Session) InitializeResult() *mcp.InitializeResult { return s.cs.InitializeResult() }

// ServerName names the server for messages and descriptions: its reported
// name and version, or its command line when it reports no name.
func (s *Session) ServerName() string {
	if ir := s.cs.InitializeResult(); ir != nil && ir.ServerInfo != nil && ir.ServerInfo.Name != "" {
		return strings.TrimSpace(ir.ServerInfo.Name + " " + ir.ServerInfo.Version)
	}
	return s.commandLine()
}

// Pid is the server process's id, which is also its process group's.
func (s *Session) Pid() int { return s.cmd.Process.Pid }

// Tools lists all of the server's tools, following pagination, within one
// CallTimeout.
func (s *Session) Tools(ctx context.Context) ([]*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
	defer cancel()
	var tools []*mcp.Tool
	for t, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, s.WithStderr(fmt.Errorf("tools/list on %s: %w", s.ServerName(), err))
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// CallTool calls one tool within CallTimeout; empty args send no arguments.
// A protocol error the server answered with is returned as an error
// matching *jsonrpc.Error (see Observation); other errors mean the server
// failed or did not answer, and are returned as the SDK gave them, without
// the server's stderr (see WithStderr).
func (s *Session) CallTool(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: name}
	if len(args) > 0 {
		params.Arguments = args
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.CallTimeout)
	defer cancel()
	return s.cs.CallTool(ctx, params)
}

// Stderr is the server's stderr so far (its last StderrLimit bytes).
func (s *Session) Stderr() string { return s.stderr.String() }

// WithStderr adds the tail of the server's stderr to err, which is usually
// where a failing server says why; err stays matchable with errors.Is/As.
// It returns err unchanged when the server wrote nothing, and nil for nil.
func (s *Session) WithStderr(err error) error {
	if err == nil {
		return nil
	}
	t := strings.TrimSpace(s.stderr.String())
	if t == "" {
		return err
	}
	if len(t) > stderrInErrors {
		t = "…" + t[len(t)-stderrInErrors:]
	}
	return fmt.Errorf("%w; server stderr: %s", err, t)
}

// Close ends the session the way the MCP stdio transport prescribes: it
// closes the server's stdin, waits TerminateDuration for it to exit, sends
// SIGTERM, waits again, then kills it; any process the server left in its
// process group is killed too. The server's own exit status is not an
// error (a server stopped on close often exits non-zero); an error means
// shutdown itself failed. Close may be called more than once.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		err := s.cs.Close()
		s.killGroup()
		var exit *exec.ExitError
		if errors.As(err, &exit) || errors.Is(err, exec.ErrWaitDelay) || errors.Is(err, os.ErrProcessDone) {
			s.log.Debug("mcp server exited", "server", s.ServerName(), "status", err)
			err = nil
		}
		if err != nil {
			s.closeErr = fmt.Errorf("close MCP server %s: %w", s.ServerName(), err)
		}
	})
	return s.closeErr
}

// NewTailBuffer returns a TailBuffer keeping the last max bytes.
func NewTailBuffer(max int) *TailBuffer { return &TailBuffer{max: max} }

// TailBuffer keeps the last bytes written to it, for a child process's
// output (an MCP server's stderr, a sandboxed script's output) whose end is
// what an error needs. Safe for concurrent writers and readers.
type TailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (w *TailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = append([]byte(nil), w.b[len(w.b)-w.max:]...)
	}
	return len(p), nil
}

func (w *TailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
