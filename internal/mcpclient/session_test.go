package mcpclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/agentworld/agentworld/internal/testkit"
)

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}

// waitGone fails the test unless every pid stops running (within a minute:
// a hang guard).
func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("process %d still running", pid)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func startHelper(t *testing.T, mode string, edit func(*Options)) *Session {
	t.Helper()
	argv, opts := helper(t, mode)
	if edit != nil {
		edit(opts)
	}
	s, err := Start(context.Background(), argv, opts)
	if err != nil {
		t.Fatalf("Start(%s): %v", mode, err)
	}
	return s
}

// TestSessionShutdownLeavesNothing runs a session whose server started a
// child that holds the server's stderr open, and checks Close stops both
// processes and every goroutine the session started.
func TestSessionShutdownLeavesNothing(t *testing.T) {
	testkit.NoLeaks(t)
	s := startHelper(t, "serve", nil)
	if got, want := s.ServerName(), "helper 0.1"; got != want {
		t.Errorf("ServerName = %q, want %q", got, want)
	}
	tools, err := s.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	if diff := cmp.Diff([]string{"crash", "result", "rpcerror", "spawn"}, names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	obs, err := Observation(s.CallTool(context.Background(), "spawn", nil))
	if err != nil {
		t.Fatal(err)
	}
	var child int
	if _, err := fmt.Sscanf(obs, `{"content":[{"type":"text","text":"%d"}]}`, &child); err != nil || child <= 0 {
		t.Fatalf("spawn answered %s (%v)", obs, err)
	}
	server := s.Pid()
	if !alive(server) || !alive(child) {
		t.Fatalf("server %d alive %v, child %d alive %v", server, alive(server), child, alive(child))
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	waitGone(t, server, child)
}

// TestCloseKillsStubbornServer: a server that ignores stdin closing and
// SIGTERM is killed after two TerminateDurations.
func TestCloseKillsStubbornServer(t *testing.T) {
	testkit.NoLeaks(t)
	s := startHelper(t, "stubborn", nil)
	if _, err := s.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := s.Pid()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	waitGone(t, pid)
}

// TestCrashQuotesStderr: a server that dies mid-call gives a call error
// (not a protocol error) that WithStderr explains with the server's stderr,
// and closing the dead session is clean.
func TestCrashQuotesStderr(t *testing.T) {
	testkit.NoLeaks(t)
	var copied bytes.Buffer
	w := &lockedBuffer{b: &copied}
	s := startHelper(t, "serve", func(o *Options) { o.Stderr = w })
	pid := s.Pid()
	_, err := s.CallTool(context.Background(), "crash", nil)
	var rpcErr *jsonrpc.Error
	if err == nil || errors.As(err, &rpcErr) {
		t.Fatalf("crash: err = %v, want a transport error", err)
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(s.Stderr(), "disk on fire") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	full := s.WithStderr(err)
	if !errors.Is(full, err) || !strings.Contains(full.Error(), "; server stderr: disk on fire") {
		t.Errorf("WithStderr = %v", full)
	}
	if !strings.Contains(w.String(), "disk on fire") {
		t.Errorf("Options.Stderr got %q", w.String())
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after crash: %v", err)
	}
	waitGone(t, pid)
	if s.WithStderr(nil) != nil {
		t.Error("WithStderr(nil) != nil")
	}
}

func TestStartFailures(t *testing.T) {
	testkit.NoLeaks(t)
	if _, err := Start(context.Background(), nil, nil); err == nil {
		t.Error("no command accepted")
	}
	_, err := Start(context.Background(), []string{"agentworld-no-such-mcp-server"}, nil)
	if !errors.Is(err, exec.ErrNotFound) || !strings.Contains(err.Error(), "connect to MCP server") {
		t.Errorf("missing command: %v", err)
	}
	argv, opts := helper(t, "fail")
	_, err = Start(context.Background(), argv, opts)
	if err == nil || !strings.Contains(err.Error(), "server stderr: bad config: no API key") {
		t.Errorf("failing server: %v", err)
	}
	argv, opts = helper(t, "silent")
	opts.StartTimeout = 300 * time.Millisecond
	_, err = Start(context.Background(), argv, opts)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("silent server: %v", err)
	}
}

// TestStderrTailIsBounded: only the last StderrLimit bytes are kept and
// an error quotes at most the last 2000 of them.
func TestStderrTailIsBounded(t *testing.T) {
	b := NewTailBuffer(5000)
	for i := range 1000 {
		fmt.Fprintf(b, "line %d\n", i)
	}
	if got := len(b.String()); got != 5000 || !strings.HasSuffix(b.String(), "line 999\n") {
		t.Errorf("kept %d bytes ending %q", got, b.String()[len(b.String())-10:])
	}
	s := &Session{stderr: b}
	msg := s.WithStderr(errors.New("x")).Error()
	if want := len("x; server stderr: …") + stderrInErrors; len(msg) != want || !strings.HasSuffix(msg, "line 999") {
		t.Errorf("error quotes %d bytes, want %d: …%s", len(msg), want, msg[len(msg)-20:])
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
