package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPCommandOverStdio runs `agentworld mcp perturbed-tracker` on the
// embedded replay default with its stdin/stdout piped to a Go SDK client.
func TestMCPCommandOverStdio(t *testing.T) {
	cin, sin := io.Pipe()   // client writes sin → command reads cin
	cout, sout := io.Pipe() // command writes sout → client reads cout
	root := New()
	root.SetIn(cin)
	root.SetOut(sout)
	var stderr strings.Builder
	root.SetErr(&stderr)
	root.SetArgs([]string{"mcp", "perturbed-tracker", "--no-db", "--seed", "7", "--log-level", "error"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); _ = sout.Close() }()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: cout, Writer: sin}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 4 {
		t.Fatalf("tools %v %v", lt, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_issues", Arguments: map[string]any{"project": "LL"}})
	if err != nil || len(res.Content) == 0 {
		t.Fatalf("call: %v %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_issues", Arguments: map[string]any{"project": 5}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "expected string, received number at project") {
		t.Fatalf("validation: %v %v", res, err)
	}
	_ = cs.Close()
	_ = sin.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mcp command: %v\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("mcp command did not stop after the client hung up")
	}
	if _, _, err := runCLI(t, "mcp", "python-terminal", "--no-db"); err == nil || !strings.Contains(err.Error(), "python-terminal") {
		t.Errorf("terminal world over MCP: %v", err)
	}
}
