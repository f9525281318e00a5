package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/httpedge"
	"github.com/agentworld/agentworld/internal/mcpworld"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

// OpenEnv's MCP tool client (MCPToolClient in huggingface/OpenEnv
// src/openenv/core/mcp_client.py, with the types of
// src/openenv/core/env_server/mcp_types.py, at commit 385de5eb) reaches a
// world's tools two ways:
//
//   - in simulation mode it steps with ListToolsAction {"type":
//     "list_tools"} and CallToolAction {"type": "call_tool", "tool_name",
//     "arguments"} and reads the observation's "tools", or its
//     "tool_name", "result" and "error";
//   - in production mode it posts JSON-RPC 2.0 to POST /mcp:
//     openenv/session/create → {session_id}, tools/list {session_id} →
//     {tools}, tools/call {name, arguments, session_id} → the tool's
//     result, openenv/session/close {session_id}. The server side carries
//     the same JSON-RPC in a WebSocket {"type": "mcp", "data": …} answered
//     by {"type": "mcp", "data": …}, on the connection's own session.
//
// Listing tools is not a step: it reads the session's world spec and
// records no turn. A tool call is a step like any other.

// openEnvToolAction says whether an OpenEnv action is one of the MCP tool
// client's: "list_tools", "call_tool" (with the tool's name) or "".
func openEnvToolAction(raw json.RawMessage) (kind, tool string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return "", ""
	}
	var a struct {
		Type     string `json:"type"`
		ToolName string `json:"tool_name"`
	}
	if json.Unmarshal(raw, &a) != nil {
		return "", ""
	}
	switch {
	case a.Type == "list_tools":
		return a.Type, ""
	case a.Type == "call_tool", a.Type == "" && a.ToolName != "":
		// CallToolAction's type defaults to "call_tool", so OpenEnv's
		// server takes {"tool_name", "arguments"} without it as a call.
		return "call_tool", a.ToolName
	}
	return "", ""
}

// sessionTools is the action space of a session's world, refused for a
// world that has no tools to list.
func (s *Server) sessionTools(ctx context.Context, id string) ([]world.Tool, error) {
	spec, err := s.m.SessionSpec(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(spec.ActionSpace.Tools) == 0 {
		return nil, badRequest("action.type", "world %s (%s) has no tools to list", spec.Name, spec.Domain)
	}
	return spec.ActionSpace.Tools, nil
}

func toolSchema(t world.Tool) json.RawMessage {
	if len(t.InputSchema) > 0 {
		return t.InputSchema
	}
	return json.RawMessage(`{"type":"object"}`)
}

func openEnvTools(tools []world.Tool) []api.OpenEnvTool {
	out := make([]api.OpenEnvTool, len(tools))
	for i, t := range tools {
		out[i] = api.OpenEnvTool{Name: t.Name, Description: t.Description, InputSchema: toolSchema(t)}
	}
	return out
}

// listToolsResult answers a list_tools action: the session's tools, with
// the session's current turn and no reward.
func (s *Server) listToolsResult(ctx context.Context, id string) (*api.OpenEnvResult, error) {
	tools, err := s.sessionTools(ctx, id)
	if err != nil {
		return nil, err
	}
	st, err := s.m.State(ctx, id)
	if err != nil {
		return nil, err
	}
	return &api.OpenEnvResult{
		Observation: api.OpenEnvObservation{Turn: st.StepCount, SessionID: id, Tools: openEnvTools(tools)},
		Done:        st.Status != sim.StatusActive,
	}, nil
}

// worldToolsResult answers a list_tools action sent before any reset: the
// tools of the world a reset would give, with no session yet.
func (s *Server) worldToolsResult(name string) (*api.OpenEnvResult, error) {
	spec, ok := s.m.World(name)
	if !ok {
		return nil, &Error{Status: http.StatusNotFound, Public: fmt.Sprintf("no world named %q", name), Field: "world_id", Code: "not_found"}
	}
	if len(spec.ActionSpace.Tools) == 0 {
		return nil, badRequest("action.type", "world %s (%s) has no tools to list", spec.Name, spec.Domain)
	}
	return &api.OpenEnvResult{Observation: api.OpenEnvObservation{Tools: openEnvTools(spec.ActionSpace.Tools)}}, nil
}

// callToolActionSchema is the action schema of a world with tools: the
// fields, defaults and constraints of OpenEnv's CallToolAction
// (mcp_types.py) in the JSON schema form its /schema answers.
func callToolActionSchema() map[string]any {
	return map[string]any{
		"title":                "CallToolAction",
		"description":          "Call one of the world's tools (list them with the action {\"type\": \"list_tools\"}).",
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"metadata":  map[string]any{"type": "object", "title": "Metadata", "description": "Additional metadata for the action", "additionalProperties": true},
			"type":      map[string]any{"type": "string", "const": "call_tool", "default": "call_tool", "title": "Type", "description": "Action type discriminator"},
			"tool_name": map[string]any{"type": "string", "title": "Tool Name", "description": "Name of the tool to call"},
			"arguments": map[string]any{"type": "object", "title": "Arguments", "description": "Arguments to pass to the tool", "additionalProperties": true},
		},
		"required": []any{"tool_name"},
	}
}

// toolResult turns a tool call's observation into what OpenEnv's client
// reads: MCP's CallToolResult (content, isError, structuredContent) plus
// "data", the value MCPToolClient.call_tool returns — the structured
// content when the tool has an output schema the answer meets, else the
// text of a single text item. An observation that is a JSON-RPC error is
// a ToolError.
func toolResult(spec *world.Spec, name, text string) (map[string]any, *api.OpenEnvToolError) {
	t, ok := spec.ActionSpace.Tool(name)
	if !ok {
		t = world.Tool{Name: name}
	}
	r := mcpworld.ParseObservation(text, t, mcpworld.SchemasOf(spec))
	if r.RPC != nil {
		return nil, &api.OpenEnvToolError{ErrorType: "execution_error", Message: r.RPC.Message}
	}
	var res map[string]any
	b, err := json.Marshal(r.Tool)
	if err != nil || json.Unmarshal(b, &res) != nil {
		return map[string]any{"data": text}, nil
	}
	res["isError"] = r.Tool.IsError // MCP's SDK leaves false out
	res["data"] = text
	if r.Tool.StructuredContent != nil {
		res["data"] = r.Tool.StructuredContent
	}
	return res, nil
}

// addToolResult fills a call_tool step's observation with the fields
// OpenEnv's CallToolObservation has.
func (s *Server) addToolResult(ctx context.Context, id, tool string, out *api.OpenEnvResult) {
	spec, err := s.m.SessionSpec(ctx, id)
	if err != nil {
		spec = &world.Spec{}
	}
	out.Observation.ToolName = tool
	out.Observation.Result, out.Observation.Error = toolResult(spec, tool, out.Observation.Text)
}

// openEnvToolStep runs one OpenEnv step whose action may be an MCP tool
// client action, over HTTP or the WebSocket.
func (s *Server) openEnvToolStep(ctx context.Context, id string, action json.RawMessage, req sim.StepRequest) (*api.OpenEnvResult, error) {
	kind, tool := openEnvToolAction(action)
	if kind == "list_tools" {
		return s.listToolsResult(ctx, id)
	}
	act, err := openEnvAction(action)
	if err != nil {
		return nil, err
	}
	req.Action = act
	res, err := s.m.Step(ctx, id, req)
	if err != nil {
		return nil, err
	}
	out := openEnvResult(id, res)
	if kind == "call_tool" {
		s.addToolResult(ctx, id, tool, &out)
	}
	return &out, nil
}

// JSON-RPC 2.0 as OpenEnv's /mcp speaks it (JsonRpcRequest and
// JsonRpcResponse in mcp_types.py: a reply has "result" or "error", and
// always "id").
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	ID      json.RawMessage `json:"id"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// JSON-RPC error codes OpenEnv's JsonRpcErrorCode uses.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
	rpcInternalError  = -32603
)

// rpcConn is the WebSocket a JSON-RPC request came on: its session is the
// one tools act on, and a session openenv/session/create makes there is
// the connection's (closed when it leaves). Nil for POST /mcp.
type rpcConn struct {
	current *string
	owned   *[]string
	// r is the WebSocket's handshake request.
	r *http.Request
}

func rpcFail(id json.RawMessage, code int, msg string) rpcResponse {
	return rpcResponse{JSONRPC: "2.0", ID: id, Error: &rpcError{Code: code, Message: msg}}
}

// rpcFromErr maps a manager error: a client's mistake (4xx) is invalid
// params, anything else an internal error, each with the public message.
func (s *Server) rpcFromErr(id json.RawMessage, err error) rpcResponse {
	e := s.clientError(err)
	if e.Status >= 400 && e.Status < 500 {
		return rpcFail(id, rpcInvalidParams, e.Public)
	}
	return rpcFail(id, rpcInternalError, e.Public)
}

// openEnvRPC answers one JSON-RPC request of OpenEnv's MCP client.
func (s *Server) openEnvRPC(ctx context.Context, raw []byte, conn *rpcConn) rpcResponse {
	var req rpcRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return rpcFail(nil, rpcParseError, "Parse error")
		}
		return rpcFail(nil, rpcInvalidRequest, "Invalid request: "+err.Error())
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		return rpcFail(req.ID, rpcInvalidRequest, `Invalid request: want {"jsonrpc": "2.0", "method", "params"?, "id"?}`)
	}
	var p struct {
		SessionID string          `json:"session_id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if len(req.Params) > 0 && string(req.Params) != "null" {
		if bytes.TrimSpace(req.Params)[0] != '{' || json.Unmarshal(req.Params, &p) != nil {
			return rpcFail(req.ID, rpcInvalidParams, "Params must be an object")
		}
	}
	session := p.SessionID
	if session == "" && conn != nil {
		session = *conn.current
	}
	if conn != nil && p.SessionID != "" && p.SessionID != *conn.current && req.Method != "openenv/session/create" {
		// another session than the connection's: where it is served
		if out, forwarded := s.rpcElsewhere(ctx, conn.r, p.SessionID, req.ID, raw); forwarded {
			return out
		}
	}
	ok := func(v any) rpcResponse { return rpcResponse{JSONRPC: "2.0", ID: req.ID, Result: v} }
	switch req.Method {
	case "openenv/session/create":
		if conn != nil && *conn.current != "" {
			return ok(map[string]any{"session_id": *conn.current})
		}
		var rr api.OpenEnvResetRequest
		var extra map[string]string
		if len(req.Params) > 0 && string(req.Params) != "null" {
			var err error
			if extra, err = openEnvDecode(req.Params, &rr, true); err != nil {
				return s.rpcFromErr(req.ID, err)
			}
		}
		rep, err := s.resetCreate(ctx, rr, extra)
		if err != nil {
			return s.rpcFromErr(req.ID, err)
		}
		if conn != nil {
			*conn.current = rep.SessionID
			*conn.owned = append(*conn.owned, rep.SessionID)
		}
		return ok(map[string]any{"session_id": rep.SessionID})
	case "openenv/session/close":
		if p.SessionID == "" {
			return rpcFail(req.ID, rpcInvalidParams, "Invalid params - 'session_id' is required")
		}
		if conn != nil && p.SessionID == *conn.current {
			return rpcFail(req.ID, rpcInvalidRequest, "Cannot close active WebSocket-managed session via MCP method")
		}
		if err := s.m.Delete(ctx, p.SessionID); err != nil {
			return s.rpcFromErr(req.ID, err)
		}
		return ok(map[string]any{"session_id": p.SessionID, "closed": true})
	case "tools/list":
		var tools []world.Tool
		if session != "" {
			t, err := s.sessionTools(ctx, session)
			if err != nil {
				return s.rpcFromErr(req.ID, err)
			}
			tools = t
		} else if spec, found := s.m.World(s.defaultWorld()); found {
			tools = spec.ActionSpace.Tools // a stateless listing, as OpenEnv's without a session
		}
		list := make([]map[string]any, len(tools))
		for i, t := range tools {
			list[i] = map[string]any{"name": t.Name, "description": t.Description, "inputSchema": toolSchema(t)}
		}
		return ok(map[string]any{"tools": list})
	case "tools/call":
		if p.Name == "" {
			return rpcFail(req.ID, rpcInvalidParams, "Missing 'name' in params")
		}
		if session == "" {
			return rpcFail(req.ID, rpcInvalidParams, "Invalid params - 'session_id' is required: create one with openenv/session/create (every call is a step of a session)")
		}
		args := p.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		act, _ := json.Marshal(map[string]json.RawMessage{"name": mustRaw(p.Name), "arguments": args})
		res, err := s.m.Step(ctx, session, sim.StepRequest{Action: act})
		if err != nil {
			return s.rpcFromErr(req.ID, err)
		}
		spec, err := s.m.SessionSpec(ctx, session)
		if err != nil {
			return s.rpcFromErr(req.ID, err)
		}
		out, terr := toolResult(spec, p.Name, res.Observation)
		if terr != nil {
			return rpcFail(req.ID, rpcInternalError, terr.Message)
		}
		return ok(out)
	}
	if req.Method == "initialize" {
		// An MCP client pointed at the OpenEnv endpoint: say where the
		// MCP servers are instead of a bare "method not found".
		return rpcFail(req.ID, rpcMethodNotFound, "Method not found: initialize: /mcp is OpenEnv's JSON-RPC endpoint (openenv/session/create, tools/list, tools/call); MCP clients connect to "+s.mcpWorldsHint())
	}
	return rpcFail(req.ID, rpcMethodNotFound, "Method not found: "+req.Method)
}

// mcpRoot is /mcp. With ?world=NAME it is that world's MCP server, as
// /mcp/NAME is (an MCP client given the bare endpoint can still pick a
// world); otherwise POST /mcp is OpenEnv's production-mode JSON-RPC
// endpoint, where an MCP initialize is answered with where the MCP
// worlds are.
func (s *Server) mcpRoot(w http.ResponseWriter, r *http.Request) {
	if name := r.URL.Query().Get("world"); name != "" && s.opts.MCP != nil {
		r.SetPathValue("world", name)
		s.mcpRouted(streamsWait(s.opts.MCP.Handler())).ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Public: "POST /mcp is OpenEnv's JSON-RPC endpoint; MCP clients connect to " + s.mcpWorldsHint(), Code: "method_not_allowed"})
		return
	}
	s.openEnvMCP(w, r)
}

// streamsWait marks an MCP client's standalone event stream (GET on the
// streamable endpoint) as waiting for its client, the way the /ws loop
// marks its connection between messages: it only carries what the server
// may have to say, so a new client that finds --max-conns full may take
// its slot (the client reconnects it; its session stays). Tool calls
// (POST) are work and keep theirs.
func streamsWait(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			httpedge.Waiting(r, true)
			defer httpedge.Waiting(r, false)
		}
		h.ServeHTTP(w, r)
	})
}

// mcpWorldsHint says where MCP clients connect, with the worlds served
// there.
func (s *Server) mcpWorldsHint() string {
	if s.opts.MCP == nil {
		return "/mcp/WORLD (this server serves no MCP worlds)"
	}
	worlds := s.opts.MCP.Worlds()
	sort.Strings(worlds)
	if len(worlds) == 0 {
		return "/mcp/WORLD (this server serves no MCP worlds)"
	}
	// The MCP Inspector's CLI (0.15) replaces any path not ending in /mcp
	// with /mcp, so the query form is the one every client can use.
	return fmt.Sprintf("/mcp?world=WORLD or /mcp/WORLD, e.g. /mcp?world=%s (MCP worlds here: %s)", worlds[0], strings.Join(worlds, ", "))
}

// openEnvMCP is POST /mcp, OpenEnv's production-mode JSON-RPC endpoint.
// Protocol errors are JSON-RPC errors in a 200 reply, as OpenEnv answers.
func (s *Server) openEnvMCP(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.routeID(w, r, rpcSession(body), body) {
		return
	}
	writeJSON(w, http.StatusOK, s.openEnvRPC(r.Context(), body, nil))
}
