package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// helperEnv makes the test binary act as a stdio MCP server (or another
// child process) instead of running tests, so session tests start a real
// server process without node or network.
const helperEnv = "AGENTWORLD_MCPCLIENT_HELPER"

func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv(helperEnv); ok {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// helper returns the argv and options that start the test binary as a
// helper process in the given mode.
func helper(t *testing.T, mode string) ([]string, *Options) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe}, &Options{
		Env:          []string{helperEnv + "=" + mode},
		StartTimeout: 2 * time.Minute,
		CallTimeout:  2 * time.Minute,
		// Each of Close's three waits (after closing stdin, after SIGTERM,
		// after SIGKILL) gets this, and Wait half of it for a descendant
		// holding stderr: at 200 ms a loaded machine failed Close with
		// "unresponsive subprocess" for a server that did exit.
		TerminateDuration: 2 * time.Second,
		ClientName:        "mcpclient-test",
	}
}

// runHelper is the helper process's main. Modes:
//   - serve: an MCP server with the tools below; exits when stdin closes;
//   - stubborn: the same server, but it ignores SIGTERM and stays after
//     stdin closes, so only SIGKILL stops it;
//   - silent: reads stdin and never answers;
//   - fail: complains on stderr and exits 2 at once;
//   - sleep: sleeps a minute (the process the spawn tool leaves behind).
func runHelper(mode string) int {
	switch mode {
	case "sleep":
		time.Sleep(time.Minute)
		return 0
	case "silent":
		buf := make([]byte, 4096)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				return 0
			}
		}
	case "fail":
		fmt.Fprintln(os.Stderr, "bad config: no API key")
		return 2
	case "serve", "stubborn":
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		return 2
	}
	if mode == "stubborn" {
		signal.Ignore(syscall.SIGTERM)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "helper", Version: "0.1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	s.AddTool(&mcp.Tool{Name: "result", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Case string `json:"case"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &args)
		for _, tc := range resultCases {
			if tc.name == args.Case {
				return tc.res, nil
			}
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no case " + args.Case}
	})
	s.AddTool(&mcp.Tool{Name: "rpcerror", InputSchema: obj}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &args)
		return nil, &jsonrpc.Error{Code: args.Code, Message: args.Message}
	})
	s.AddTool(&mcp.Tool{Name: "crash", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "disk on fire")
		os.Exit(3)
		return nil, nil
	})
	s.AddTool(&mcp.Tool{Name: "spawn", InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		// The child keeps the server's stderr pipe open, the worst case for
		// the client's shutdown.
		c := exec.Command(exe)
		c.Env = append(os.Environ(), helperEnv+"=sleep")
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(c.Process.Pid)}}}, nil
	})
	err := s.Run(context.Background(), &mcp.StdioTransport{})
	if mode == "stubborn" {
		select {}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
