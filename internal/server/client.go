package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentworld/agentworld/internal/sim"
)

// Client opens and steps sessions over a running server's native API
// (a play.Player).
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
}

func (c *Client) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
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
		var e errorBody
		if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("%s: %s", resp.Status, e.Error.Message)
		}
		return fmt.Errorf("%s: %s", resp.Status, raw)
	}
	return json.Unmarshal(raw, out)
}

// Create implements Player.
func (c *Client) Create(ctx context.Context, req sim.CreateRequest) (*sim.Reply, error) {
	var rep sim.Reply
	if err := c.post(ctx, "/v1/sessions", CreateSessionRequest{WorldID: req.WorldID, Seed: req.Seed, Model: req.Model, Backend: req.Backend}, &rep); err != nil {
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
