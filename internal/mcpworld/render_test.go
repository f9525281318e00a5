package mcpworld

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/mcpclient"
	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/world"
)

// TestFacadeKeepsCanonicalObservations: a simulated observation written in
// the canonical form (what imported demonstrations and real recordings
// look like) reaches an MCP client through the facade and, rendered by the
// client the way realenv records a real server, is the same bytes again;
// an injected JSON-RPC fault renders as the session API records it.
func TestFacadeKeepsCanonicalObservations(t *testing.T) {
	render := func(r *mcp.CallToolResult) string {
		s, err := mcpclient.RenderResult(r)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	size := int64(7)
	fault := &perturb.Fault{Kind: perturb.JSONRPCError, RPCCode: -32001, Message: "backend <gone> & away"}
	cases := []struct {
		name, tool string
		obs        string
		fault      *perturb.Fault
	}{
		{"text", "delete_issue", render(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted <3> & archived"}}}), nil},
		{"tool error", "delete_issue", render(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "Error: issue 3 is locked"}}}), nil},
		{"image and resources", "delete_issue", render(&mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ImageContent{Data: []byte("png"), MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.txt", MIMEType: "text/plain", Text: "a"}},
			&mcp.ResourceLink{URI: "file:///b.md", Name: "b.md", Size: &size},
		}}), nil},
		{"structured", "get_issue", render(&mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: `{"title":"Crash on start"}`}},
			StructuredContent: map[string]any{"title": "Crash on start"},
		}), nil},
		{"json-rpc fault", "delete_issue", mcpclient.RenderFault(fault), fault},
	}
	sim := &fakeSim{answer: func(action string) *StepOutcome {
		for i, tc := range cases {
			if strings.Contains(action, fmt.Sprintf(`"id":%d}`, i)) {
				return &StepOutcome{Observation: tc.obs, Fault: tc.fault}
			}
		}
		return &StepOutcome{Observation: "no case"}
	}}
	f, err := NewFacade(sim, []*world.Spec{trackerSpec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	cs := connectInMemory(t, f, "tracker")
	defer cs.Close()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(fmt.Sprintf(`{"id":%d}`, i))})
			got, err := mcpclient.Observation(res, err)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.obs, got); diff != "" {
				t.Errorf("client's rendering differs from the simulated observation (-simulated +client):\n%s", diff)
			}
		})
	}
}
