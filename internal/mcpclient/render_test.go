package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/trajectory"
)

var size = int64(42)

// resultCases are tool results and their one observation text. The helper
// server returns the same values, so each case is checked on the real path
// (over stdio through the SDK) and the simulated ones.
var resultCases = []struct {
	name string
	res  *mcp.CallToolResult
	want string
}{
	{"text", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3 files found"}}},
		`{"content":[{"type":"text","text":"3 files found"}]}`},
	{"text keeps html, unicode and escaped backslashes",
		&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "<b>a & b</b> → ü \\u003c \"q\"\n"}}},
		`{"content":[{"type":"text","text":"<b>a & b</b> → ü \\u003c \"q\"\n"}]}`},
	{"two text items", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: ""}}},
		`{"content":[{"type":"text","text":"a"},{"type":"text","text":""}]}`},
	{"image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png"}}},
		`{"content":[{"type":"image","mimeType":"image/png","data":"iVBORw=="}]}`},
	{"embedded text resource", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "a < b & c"}}}},
		`{"content":[{"type":"resource","resource":{"uri":"file:///notes.txt","mimeType":"text/plain","text":"a < b & c"}}]}`},
	{"embedded blob resource", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "mem://x", MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2}}}}},
		`{"content":[{"type":"resource","resource":{"uri":"mem://x","mimeType":"application/octet-stream","blob":"AAEC"}}]}`},
	{"resource link", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ResourceLink{URI: "file:///r.md", Name: "r.md", MIMEType: "text/markdown", Size: &size}}},
		`{"content":[{"type":"resource_link","mimeType":"text/markdown","uri":"file:///r.md","name":"r.md","size":42}]}`},
	{"structured content", &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: `{"total":5}`}},
		StructuredContent: map[string]any{"total": 5, "items": []any{"a<b", 1.5, nil, true}},
	}, `{"content":[{"type":"text","text":"{\"total\":5}"}],"structuredContent":{"items":["a<b",1.5,null,true],"total":5}}`},
	{"tool error", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "Error: repository not found"}}},
		`{"content":[{"type":"text","text":"Error: repository not found"}],"isError":true}`},
	{"structured error", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "bad"}}, StructuredContent: map[string]any{"code": "E1"}},
		`{"content":[{"type":"text","text":"bad"}],"structuredContent":{"code":"E1"},"isError":true}`},
	{"no content", &mcp.CallToolResult{}, `{"content":[]}`},
	{"result meta dropped, item annotations kept", &mcp.CallToolResult{
		Meta:    mcp.Meta{"trace": "abc"},
		Content: []mcp.Content{&mcp.TextContent{Text: "hi", Annotations: &mcp.Annotations{Priority: 0.5}}},
	}, `{"content":[{"type":"text","text":"hi","annotations":{"priority":0.5}}]}`},
}

// TestRenderResult checks each result renders to its text on every path an
// MCP observation takes: rendered where it was made (the simulator side),
// received from a real server over stdio, and read back from observation
// text (a demonstration or a world model's prediction) and rendered again.
func TestRenderResult(t *testing.T) {
	argv, opts := helper(t, "serve")
	s, err := Start(context.Background(), argv, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range resultCases {
		t.Run(tc.name, func(t *testing.T) {
			sim, err := RenderResult(tc.res)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, sim); diff != "" {
				t.Errorf("in-process rendering (-want +got):\n%s", diff)
			}
			args, _ := json.Marshal(map[string]string{"case": tc.name})
			real, err := Observation(s.CallTool(context.Background(), "result", args))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(sim, real); diff != "" {
				t.Errorf("real server's result renders differently (-simulated +real):\n%s", diff)
			}
			var back mcp.CallToolResult
			if err := json.Unmarshal([]byte(sim), &back); err != nil {
				t.Fatalf("observation does not parse as a tool result: %v", err)
			}
			again, err := RenderResult(&back)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(sim, again); diff != "" {
				t.Errorf("re-rendering the observation changes it (-first +again):\n%s", diff)
			}
		})
	}
	if _, err := RenderResult(nil); err == nil {
		t.Error("RenderResult(nil) succeeded")
	}
}

// TestRenderErrorsAndFaults checks a protocol error a real server answers
// with and the injected fault that imitates it render the same bytes, and
// the other fault kinds render as documented.
func TestRenderErrorsAndFaults(t *testing.T) {
	argv, opts := helper(t, "serve")
	s, err := Start(context.Background(), argv, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tests := []struct {
		name  string
		real  func() (string, error) // nil: the fault has no real counterpart
		fault *perturb.Fault
		want  string
	}{
		{"json-rpc error", func() (string, error) {
			return Observation(s.CallTool(context.Background(), "rpcerror", json.RawMessage(`{"code":-32602,"message":"Invalid <params> & more"}`)))
		}, &perturb.Fault{Kind: perturb.JSONRPCError, RPCCode: -32602, Message: "Invalid <params> & more"},
			`{"error":{"code":-32602,"message":"Invalid <params> & more"}}`},
		{"unknown tool", func() (string, error) {
			return Observation(s.CallTool(context.Background(), "no_such_tool", nil))
		}, &perturb.Fault{Kind: perturb.JSONRPCError, RPCCode: -32602, Message: `unknown tool "no_such_tool"`},
			`{"error":{"code":-32602,"message":"unknown tool \"no_such_tool\""}}`},
		{"internal error", func() (string, error) {
			return Observation(nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "boom"})
		}, &perturb.Fault{Kind: perturb.JSONRPCError, RPCCode: -32603, Message: "boom"},
			`{"error":{"code":-32603,"message":"boom"}}`},
		{"http error with message", nil, &perturb.Fault{Kind: perturb.HTTPError, HTTPStatus: 503, Message: "upstream <down>"},
			`HTTP 503 Service Unavailable: upstream <down>`},
		{"http error, message is the status text", nil, &perturb.Fault{Kind: perturb.HTTPError, HTTPStatus: 429, Message: "Too Many Requests"},
			`HTTP 429 Too Many Requests`},
		{"malformed payload", nil, &perturb.Fault{Kind: perturb.MalformedPayload, Payload: `{"content":[{"type":"te`},
			`{"content":[{"type":"te`},
		{"unknown kind", nil, &perturb.Fault{Kind: "gremlins"}, `fault: gremlins`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sim := RenderFault(tc.fault)
			if diff := cmp.Diff(tc.want, sim); diff != "" {
				t.Errorf("fault (-want +got):\n%s", diff)
			}
			if tc.real == nil {
				return
			}
			real, err := tc.real()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(sim, real); diff != "" {
				t.Errorf("real protocol error renders differently from the fault (-fault +real):\n%s", diff)
			}
		})
	}
}

func TestObservationPassesFailures(t *testing.T) {
	cause := errors.New("connection closed")
	obs, err := Observation(nil, cause)
	if obs != "" || !errors.Is(err, cause) {
		t.Errorf("Observation(nil, %v) = %q, %v", cause, obs, err)
	}
}

func TestUnescapeHTML(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"a\u003cb\u003e\u0026"`, `"a<b>&"`},
		{`"\\u003c"`, `"\\u003c"`},
		{`"\\\u003c"`, `"\\<"`},
		{`"\u00e9\n"`, `"\u00e9\n"`},
		{`{"k\u0026":[1,"x"]}`, `{"k&":[1,"x"]}`},
		{`"\u003`, `"\u003`},
		{`\`, `\`},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, string(unescapeHTML([]byte(tc.in)))); diff != "" {
			t.Errorf("unescapeHTML(%s) (-want +got):\n%s", tc.in, diff)
		}
	}
}

// FuzzUnescapeHTML: for any text, undoing json.Marshal's HTML escaping gives
// exactly what the project's non-escaping encoder writes.
func FuzzUnescapeHTML(f *testing.F) {
	for _, s := range []string{"<a href=\"x\">&amp;</a>", `\u003c`, "\\\u003c", "plain", "\u2028 \x00 ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		esc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		want, err := trajectory.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := unescapeHTML(esc); string(got) != string(want) {
			t.Fatalf("unescapeHTML(%s) = %s, want %s", esc, got, want)
		}
	})
}
