package server

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/testkit"
)

// TestMCPInspectorCLI drives serve's MCP worlds with the real MCP
// Inspector CLI (@modelcontextprotocol/inspector-cli 0.15.0, pinned in
// tools/npm: the last release for Node 20), exactly as docs/worlds.md
// tells a user to: it rewrites any path but /mcp to /mcp, so it reaches a
// world through /mcp?world=NAME, and given /mcp/NAME it is told where the
// worlds are.
func TestMCPInspectorCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node")
	}
	cli := testkit.NPMModule(t, "@modelcontextprotocol/inspector-cli", "build/cli.js")
	_, s := newAppServer(t, app.Config{}, nil)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	inspect := func(url string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "node", append([]string{cli, "--cli", url, "--transport", "http"}, args...)...).CombinedOutput()
		return string(out), err
	}

	out, err := inspect(srv.URL+"/mcp?world=perturbed-tracker", "--method", "tools/list")
	if err != nil {
		t.Fatalf("tools/list: %v\n%s", err, out)
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Tools) != 4 {
		t.Fatalf("tools/list printed %v (%v), want the world's four tools:\n%s", list, err, out)
	}

	// A call answered by the embedded default backend (replay of the
	// world's recorded demonstrations), structured as its output schema.
	out, err = inspect(srv.URL+"/mcp?world=perturbed-tracker", "--method", "tools/call", "--tool-name", "get_issue", "--tool-arg", "key=LL-7")
	if err != nil {
		t.Fatalf("tools/call: %v\n%s", err, out)
	}
	var call struct {
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
		IsError           bool             `json:"isError"`
	}
	if err := json.Unmarshal([]byte(out), &call); err != nil || len(call.Content) == 0 || call.IsError || call.StructuredContent["key"] != "LL-7" {
		t.Fatalf("tools/call printed %+v (%v):\n%s", call, err, out)
	}

	// Given a world's own path the CLI posts to /mcp: the failure names
	// the way in.
	out, err = inspect(srv.URL+"/mcp/perturbed-tracker", "--method", "tools/list")
	if err == nil {
		t.Fatalf("the CLI connected through /mcp without a world:\n%s", out)
	}
	for _, want := range []string{"/mcp?world=WORLD", "perturbed-tracker"} {
		if !strings.Contains(out, want) {
			t.Errorf("the CLI's failure does not mention %s:\n%s", want, out)
		}
	}
}
