package mcpworld

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/world"
)

func importCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestImportMemoryServer imports the real npm memory server with two
// recorded calls and checks the spec survives a YAML round trip.
func TestImportMemoryServer(t *testing.T) {
	argv := memoryServer(t)
	spec, err := Import(importCtx(t), argv, &ImportOptions{
		Env: []string{"MEMORY_FILE_PATH=" + filepath.Join(t.TempDir(), "memory.jsonl")},
		Calls: []conversation.ToolCall{
			{Name: "create_entities", Arguments: json.RawMessage(`{"entities":[{"name":"Ada Quill","entityType":"person","observations":["keeps bees"]}]}`)},
			{Name: "read_graph"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Domain != "mcp" || spec.Name == "" {
		t.Errorf("domain %q name %q", spec.Domain, spec.Name)
	}
	for _, name := range []string{"create_entities", "read_graph", "search_nodes", "open_nodes"} {
		tool, ok := spec.ActionSpace.Tool(name)
		if !ok {
			t.Fatalf("tool %s missing from %v", name, spec.ToolNames())
		}
		if !json.Valid(tool.InputSchema) || len(tool.OutputSchema) == 0 {
			t.Errorf("tool %s: input schema %s, output schema %s", name, tool.InputSchema, tool.OutputSchema)
		}
	}
	if len(spec.Demonstrations) != 2 {
		t.Fatalf("%d demonstrations", len(spec.Demonstrations))
	}
	d := spec.Demonstrations[1]
	if d.Action != `{"arguments":{},"name":"read_graph"}` || !strings.Contains(d.Observation, "Ada Quill") || !strings.Contains(d.Observation, `"structuredContent"`) {
		t.Errorf("demonstration %+v", d)
	}
	y, err := MarshalSpecYAML(spec)
	if err != nil {
		t.Fatal(err)
	}
	back, err := world.Parse(y, "memory.yaml")
	if err != nil {
		t.Fatalf("re-read YAML: %v\n%s", err, y)
	}
	if diff := cmp.Diff(specJSON(t, spec), specJSON(t, back)); diff != "" {
		t.Errorf("YAML round trip changed the spec (-want +got):\n%s", diff)
	}
}

func specJSON(t *testing.T, s *world.Spec) any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// TestImportEverythingServer records a good and a bad call against the
// "everything" server, and checks our validator words the bad call's
// problem exactly as the real server does.
func TestImportEverythingServer(t *testing.T) {
	spec, err := Import(importCtx(t), everythingServer(t), &ImportOptions{
		Name: "everything",
		Calls: []conversation.ToolCall{
			{Name: "echo", Arguments: json.RawMessage(`{"message":"hello there"}`)},
			{Name: "echo", Arguments: json.RawMessage(`{"message":5}`)},
			{Name: "get-sum", Arguments: json.RawMessage(`{"a":2,"b":3}`)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != "everything" {
		t.Errorf("name %q", spec.Name)
	}
	if !strings.Contains(spec.Demonstrations[0].Observation, "hello there") {
		t.Errorf("echo demonstration: %s", spec.Demonstrations[0].Observation)
	}
	if !strings.Contains(spec.Demonstrations[2].Observation, "5") {
		t.Errorf("get-sum demonstration: %s", spec.Demonstrations[2].Observation)
	}
	// The real server's validation failure, and ours for the same input.
	real := ParseObservation(spec.Demonstrations[1].Observation, world.Tool{}, nil)
	echo, _ := spec.ActionSpace.Tool("echo")
	ours := ValidationFailure("echo", NewValidator(echo.InputSchema).Check(json.RawMessage(`{"message":5}`)))
	if diff := cmp.Diff(mustResult(t, real.Tool), mustResult(t, ours)); diff != "" {
		t.Errorf("validation error differs from the real server's (-real +ours):\n%s", diff)
	}
	if _, err := Import(importCtx(t), everythingServer(t), &ImportOptions{Calls: []conversation.ToolCall{{Name: "no-such-tool"}}}); err == nil || !strings.Contains(err.Error(), `no tool "no-such-tool"`) {
		t.Errorf("unknown tool: %v", err)
	}
}

func mustResult(t *testing.T, r any) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestImportBadCommand(t *testing.T) {
	_, err := Import(context.Background(), []string{"/nonexistent/mcp-server"}, &ImportOptions{Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "connect to MCP server") {
		t.Errorf("got %v", err)
	}
	if _, err := Import(context.Background(), nil, nil); err == nil {
		t.Error("no command accepted")
	}
}
