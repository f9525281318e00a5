package mcpworld

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/testkit"
)

// childEnv makes the test binary act as an MCP server over stdio (see
// TestMain), so real clients can start it as a subprocess.
const childEnv = "AGENTWORLD_MCPWORLD_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "stdio" {
		os.Exit(runStdioChild())
	}
	os.Exit(m.Run())
}

// runStdioChild serves the test world over stdin/stdout until the client
// hangs up.
func runStdioChild() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := newTestWorldHarness(ctx, os.Getenv("AGENTWORLD_TEST_MODEL_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	defer h.Close()
	if err := h.facade.ServeStdio(ctx, h.world, SessionOptions{}, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// clientCalls are made by every client: a valid structured call, a schema
// violation, and a tool error.
var clientCalls = []map[string]any{
	{"name": "get_issue", "arguments": map[string]any{"id": 7}},
	{"name": "get_issue", "arguments": map[string]any{"id": "seven"}},
	{"name": "delete_issue", "arguments": map[string]any{"id": 3}},
}

type clientReport struct {
	Tools []struct {
		Name            string `json:"name"`
		HasOutputSchema bool   `json:"hasOutputSchema"`
	} `json:"tools"`
	Results []struct {
		Result *struct {
			Content           []map[string]any `json:"content"`
			StructuredContent map[string]any   `json:"structuredContent"`
			IsError           bool             `json:"isError"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"results"`
}

func checkReport(t *testing.T, r clientReport) {
	t.Helper()
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
		if tl.Name == "get_issue" && !tl.HasOutputSchema {
			t.Error("get_issue lost its output schema")
		}
	}
	if len(names) != 2 {
		t.Fatalf("tools %v", names)
	}
	if len(r.Results) != 3 {
		t.Fatalf("results %+v", r.Results)
	}
	if res := r.Results[0].Result; res == nil || res.IsError || res.StructuredContent["title"] == nil {
		t.Errorf("structured call: %+v", r.Results[0])
	}
	if res := r.Results[1].Result; res == nil || !res.IsError || !strings.Contains(fmt.Sprint(res.Content), "Input validation error: Invalid arguments for tool get_issue") {
		t.Errorf("validation call: %+v", r.Results[1])
	}
	if res := r.Results[2].Result; res == nil || !res.IsError {
		t.Errorf("tool error call: %+v", r.Results[2])
	}
}

// runNodeClient runs testdata/mcp-client.mjs with the pinned npm SDK.
func runNodeClient(t *testing.T, env []string, transport ...string) clientReport {
	t.Helper()
	sdk := filepath.Join(testkit.NPMDir(t), "node_modules", "@modelcontextprotocol", "sdk")
	calls, _ := json.Marshal(clientCalls)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"testdata/mcp-client.mjs", sdk, string(calls)}, transport...)
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client: %v\n%s", err, stderr.String())
	}
	var r clientReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("node client output: %v\n%s", err, out)
	}
	return r
}

// runGoClient lists and calls the tools with the Go SDK client.
func runGoClient(t *testing.T, tr mcp.Transport) clientReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Tools   []map[string]any `json:"tools"`
		Results []map[string]any `json:"results"`
	}
	for _, tl := range lt.Tools {
		raw.Tools = append(raw.Tools, map[string]any{"name": tl.Name, "hasOutputSchema": tl.OutputSchema != nil})
	}
	for _, c := range clientCalls {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c["name"].(string), Arguments: c["arguments"]})
		if err != nil {
			raw.Results = append(raw.Results, map[string]any{"error": map[string]any{"message": err.Error()}})
			continue
		}
		raw.Results = append(raw.Results, map[string]any{"result": res})
	}
	b, _ := json.Marshal(raw)
	var r clientReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func childEnvVars(h *testWorldHarness) []string {
	return []string{childEnv + "=stdio", "AGENTWORLD_TEST_MODEL_URL=" + h.modelURL}
}

func stdioChildCommand(h *testWorldHarness) *exec.Cmd {
	cmd := testkit.Child("", childEnvVars(h)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestClientsOverStdioAndHTTP: the Go SDK client and the npm TypeScript SDK
// client list and call the tools of a simulated world over stdio (a
// subprocess) and over streamable HTTP.
func TestClientsOverStdioAndHTTP(t *testing.T) {
	ctx := context.Background()
	h, err := newTestWorldHarness(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle("/mcp/{world}", h.facade.Handler())
	ts := httptest.NewServer(mux)
	defer ts.Close()
	endpoint := ts.URL + "/mcp/" + h.world

	h.model.Reset()
	t.Run("go/http", func(t *testing.T) {
		checkReport(t, runGoClient(t, &mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true}))
	})
	t.Run("go/stdio", func(t *testing.T) {
		checkReport(t, runGoClient(t, &mcp.CommandTransport{Command: stdioChildCommand(h), TerminateDuration: 5 * time.Second}))
	})
	t.Run("npm/http", func(t *testing.T) {
		checkReport(t, runNodeClient(t, nil, "--http", endpoint))
	})
	t.Run("npm/stdio", func(t *testing.T) {
		checkReport(t, runNodeClient(t, childEnvVars(h), "--stdio", os.Args[0], "-test.run=^$"))
	})
	h.checkSteps(t)
}
