// Package api is the wire format of agentworld's HTTP server and a small
// Go client of it: the request and reply types of the native session API
// ([CreateSessionRequest], [StepSessionRequest], [ForkSessionRequest],
// [ErrorBody]; replies are [sim.Reply] and [sim.StepResult]) and of
// OpenEnv over HTTP and WebSocket ([OpenEnvResetRequest],
// [OpenEnvStepRequest], [OpenEnvResult], [OpenEnvWSMessage]). The server
// decodes and encodes these types; [Client] (what `agentworld play
// --server` and the end-to-end tests use) sends them.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

// Native session API wire types.

// CreateSessionRequest is the body of POST /v1/sessions.
type CreateSessionRequest struct {
	// World is an inline world spec (an object in the world-spec schema).
	World json.RawMessage `json:"world,omitempty"`
	// WorldID names a loaded world.
	WorldID string `json:"world_id,omitempty"`
	Seed    *int64 `json:"seed,omitempty"`
	Model   string `json:"model,omitempty"`
	Backend string `json:"backend,omitempty"`
	// Shadow asks a backend that supports it to run a second environment
	// beside the first (e.g. "real"); stored in params["shadow"].
	Shadow string                     `json:"shadow,omitempty"`
	Params map[string]json.RawMessage `json:"params,omitempty"`
	Labels map[string]string          `json:"labels,omitempty"`
}

// StepSessionRequest is the body of POST /v1/sessions/{id}/step.
type StepSessionRequest struct {
	// Action is the agent's action: a string, or JSON (a keystroke list, a
	// tool call object).
	Action json.RawMessage `json:"action"`
	// Turn makes the step idempotent (see sim.StepRequest).
	Turn int `json:"turn,omitempty"`
	// Control is extra simulation instruction for this step only.
	Control    string            `json:"control,omitempty"`
	WorldState string            `json:"world_state,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// ForkSessionRequest is the body of POST /v1/sessions/{id}/fork (optional).
type ForkSessionRequest struct {
	AtTurn int               `json:"at_turn,omitempty"`
	Seed   *int64            `json:"seed,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

// OpenEnv wire types. They match huggingface/OpenEnv's HTTP server
// (formerly meta-pytorch/OpenEnv; src/openenv/core/env_server/
// http_server.py and types.py, checked again at commit 385de5eb; the
// messages its clients send are pinned in testdata/openenv):
// POST /reset {seed?, episode_id?, …extra} →
// {observation, reward, done, metadata?}; POST /step {action: {…},
// timeout_s?, request_id?, …extra} → the same shape; GET /state →
// {episode_id, step_count, …}; GET /health → {status: "healthy"}; GET
// /schema → {action, observation, state} JSON schemas; WebSocket /ws with
// client messages {type: "reset"|"step"|"state"|"close", data} and server
// messages {type: "observation"|"state"|"error", data}. Observations carry
// reward and done beside the observation object and metadata with our step
// info. Every route is also mounted per world under /openenv/{world}, so a
// client given that base URL (as verifiers' OpenEnv taskset and the
// trainer adapters are) resets into that world and reads its /schema.

// OpenEnvResetRequest is POST /reset's body and a WebSocket reset's data.
// Beyond OpenEnv's seed and episode_id it accepts the world to run and,
// on a WebSocket, session_id to attach to an existing session.
type OpenEnvResetRequest struct {
	Seed      *int64          `json:"seed,omitempty"`
	EpisodeID string          `json:"episode_id,omitempty"`
	WorldID   string          `json:"world_id,omitempty"`
	World     json.RawMessage `json:"world,omitempty"`
	Model     string          `json:"model,omitempty"`
	Backend   string          `json:"backend,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	// GroupKey makes the reset a fork of one root session cached per key
	// (and world, seed, model, backend): the G resets of a GRPO group that
	// carry the same key share their initial state.
	GroupKey string `json:"group_key,omitempty"`
}

// OpenEnvStepRequest is POST /step's body. SessionID (or EpisodeID)
// selects the session; without either, the session named by the
// openenv_session cookie the client's /reset was answered with.
type OpenEnvStepRequest struct {
	Action    json.RawMessage `json:"action"`
	TimeoutS  *float64        `json:"timeout_s,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	EpisodeID string          `json:"episode_id,omitempty"`
	Turn      int             `json:"turn,omitempty"`
}

// OpenEnvResult is the body of /reset and /step replies and the data of a
// WebSocket observation message.
type OpenEnvResult struct {
	Observation OpenEnvObservation `json:"observation"`
	Reward      *float64           `json:"reward"`
	Done        bool               `json:"done"`
	Metadata    map[string]any     `json:"metadata,omitempty"`
}

// OpenEnvObservation is the observation object of our environments. The
// last four fields answer OpenEnv's MCP tool client (MCPToolClient in
// src/openenv/core/mcp_client.py): Tools a {"type": "list_tools"} action,
// ToolName, Result and Error a {"type": "call_tool"} one.
type OpenEnvObservation struct {
	Text      string            `json:"text"`
	Turn      int               `json:"turn"`
	SessionID string            `json:"session_id"`
	Truncated bool              `json:"truncated"`
	Tools     []OpenEnvTool     `json:"tools,omitempty"`
	ToolName  string            `json:"tool_name,omitempty"`
	Result    map[string]any    `json:"result,omitempty"`
	Error     *OpenEnvToolError `json:"error,omitempty"`
}

// OpenEnvTool is one entry of a list_tools observation (OpenEnv's Tool
// model); JSON-RPC tools/list names the schema inputSchema, as MCP does,
// and MCPToolClient reads either.
type OpenEnvTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// OpenEnvToolError is OpenEnv's ToolError: a failure of the call itself,
// not an error the tool reported (that is in the result, with isError).
type OpenEnvToolError struct {
	ErrorType string `json:"error_type"`
	Message   string `json:"message"`
}

// OpenEnvWSMessage is one WebSocket frame in either direction.
type OpenEnvWSMessage struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// ErrorBody is the JSON shape of every error reply.
type ErrorBody struct {
	Error struct {
		Message string `json:"message"`
		Field   string `json:"field,omitempty"`
		Code    string `json:"code"`
		// Retryable says the same request may succeed later (see the
		// Retry-After header).
		Retryable bool `json:"retryable,omitempty"`
	} `json:"error"`
}

// Client opens, steps, forks and closes sessions over a running server's
// native API (a play.Player and a rollout.Simulator).
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
}

func (c *Client) post(ctx context.Context, path string, body, out any) error {
	return c.do(ctx, http.MethodPost, path, body, out)
}

// do sends one request (a JSON body unless body is nil) and decodes the
// answer into out unless out is nil; a status >= 300 is an error carrying
// the server's message.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e ErrorBody
		if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("%s: %s", resp.Status, e.Error.Message)
		}
		return fmt.Errorf("%s: %s", resp.Status, raw)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// World returns a loaded world's spec (GET /v1/worlds/{name}).
func (c *Client) World(ctx context.Context, name string) (*world.Spec, error) {
	var s world.Spec
	if err := c.do(ctx, http.MethodGet, "/v1/worlds/"+name, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Fork branches a session (POST /v1/sessions/{id}/fork).
func (c *Client) Fork(ctx context.Context, id string, req sim.ForkRequest) (*sim.Reply, error) {
	var rep sim.Reply
	if err := c.post(ctx, "/v1/sessions/"+id+"/fork", ForkSessionRequest{AtTurn: req.AtTurn, Seed: req.Seed, Labels: req.Labels}, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Delete closes a session (DELETE /v1/sessions/{id}).
func (c *Client) Delete(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/sessions/"+id, nil, nil)
}

// Create implements Player.
func (c *Client) Create(ctx context.Context, req sim.CreateRequest) (*sim.Reply, error) {
	var rep sim.Reply
	if err := c.post(ctx, "/v1/sessions", CreateSessionRequest{WorldID: req.WorldID, Seed: req.Seed, Model: req.Model, Backend: req.Backend, Labels: req.Labels}, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// Step implements Player.
func (c *Client) Step(ctx context.Context, id string, req sim.StepRequest) (*sim.StepResult, error) {
	var res sim.StepResult
	if err := c.post(ctx, "/v1/sessions/"+id+"/step", StepSessionRequest{Action: req.Action, Turn: req.Turn}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
