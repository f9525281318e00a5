package mcpclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// RenderResult writes a tool result as observation text. This is the one
// rendering every MCP observation goes through (recorded from a real server,
// imported as a demonstration, or compared in shadow), so real and simulated
// observations of the same result are the same bytes. The text is MCP's wire
// shape in the SDK's field order, {"content": […], "structuredContent": …,
// "isError": …} (the last two only when set), compact and without HTML
// escaping, so '<', '>' and '&' read as the server wrote them. A result
// without content renders "content":[] as servers send it. The result's own
// _meta and resultType are protocol bookkeeping (newer protocol versions add
// the server's identity and "complete" to every result) and are left out,
// so a tool's output reads the same whatever protocol version its server
// speaks; _meta and annotations inside content items are kept.
func RenderResult(r *mcp.CallToolResult) (string, error) {
	if r == nil {
		return "", errors.New("render tool result: no result")
	}
	w := resultWire{Content: r.Content, StructuredContent: r.StructuredContent, IsError: r.IsError}
	if w.Content == nil {
		w.Content = []mcp.Content{}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("render tool result: %w", err)
	}
	return string(unescapeHTML(b)), nil
}

// resultWire is the part of a tool result an observation shows.
type resultWire struct {
	Content           []mcp.Content `json:"content"`
	StructuredContent any           `json:"structuredContent,omitempty"`
	IsError           bool          `json:"isError,omitempty"`
}

// RenderError writes a JSON-RPC protocol error (unknown tool, invalid
// params, an injected JSON-RPC fault) as observation text:
// {"error":{"code":…,"message":…}}, keys sorted, no HTML escaping.
func RenderError(code int64, message string) string {
	b, _ := trajectory.Marshal(map[string]any{"error": map[string]any{"code": code, "message": message}})
	return string(b)
}

// RenderFault writes a direct fault (a perturbation rule answering a step
// instead of the environment) as observation text: a JSON-RPC fault exactly
// as RenderError writes a real server's protocol error, an HTTP fault as a
// status line ("HTTP 503 Service Unavailable: message"), a malformed payload
// as the payload itself.
func RenderFault(f *perturb.Fault) string {
	switch f.Kind {
	case perturb.HTTPError:
		s := fmt.Sprintf("HTTP %d %s", f.HTTPStatus, http.StatusText(f.HTTPStatus))
		if f.Message != "" && f.Message != http.StatusText(f.HTTPStatus) {
			s += ": " + f.Message
		}
		return s
	case perturb.JSONRPCError:
		return RenderError(int64(f.RPCCode), f.Message)
	case perturb.MalformedPayload:
		return f.Payload
	}
	return "fault: " + string(f.Kind)
}

// Observation renders the outcome of a tools/call as observation text: the
// result, or a JSON-RPC error the server answered with (which a client sees
// as the call's answer, not as a failure). Any other error (the server died,
// the call timed out) is returned unchanged and the text is "".
func Observation(res *mcp.CallToolResult, err error) (string, error) {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		return RenderError(rpcErr.Code, rpcErr.Message), nil
	case err != nil:
		return "", err
	}
	return RenderResult(res)
}

// unescapeHTML undoes encoding/json's HTML escaping (\u003c, \u003e, \u0026)
// in compact JSON it produced, keeping every other byte, so key order and
// number text stay as encoded. Outside strings json.Marshal writes no
// backslash, and inside them each backslash starts an escape; consuming
// escapes whole means an escaped backslash followed by "u003c" stays as is.
func unescapeHTML(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "003c":
				out = append(out, '<')
				i += 5
				continue
			case "003e":
				out = append(out, '>')
				i += 5
				continue
			case "0026":
				out = append(out, '&')
				i += 5
				continue
			}
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}
