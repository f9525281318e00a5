package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

// Simulator is what the agent loop needs of the simulator: a world's spec
// (its domain, tools and reward rules), a reset, forks of a session, steps
// and closing a session. [Embedded] serves it in-process; [Remote] over a
// running server's native session API.
type Simulator interface {
	World(ctx context.Context, name string) (*world.Spec, error)
	Create(ctx context.Context, req sim.CreateRequest) (*sim.Reply, error)
	Fork(ctx context.Context, id string, req sim.ForkRequest) (*sim.Reply, error)
	Step(ctx context.Context, id string, req sim.StepRequest) (*sim.StepResult, error)
	Delete(ctx context.Context, id string) error
}

// Embedded is a [Simulator] over an in-process manager.
type Embedded struct{ M *sim.Manager }

// World implements [Simulator].
func (e Embedded) World(_ context.Context, name string) (*world.Spec, error) {
	s, ok := e.M.World(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q", sim.ErrUnknownWorld, name)
	}
	return s, nil
}

// Create implements [Simulator].
func (e Embedded) Create(ctx context.Context, req sim.CreateRequest) (*sim.Reply, error) {
	return e.M.Create(ctx, req)
}

// Fork implements [Simulator].
func (e Embedded) Fork(ctx context.Context, id string, req sim.ForkRequest) (*sim.Reply, error) {
	return e.M.Fork(ctx, id, req)
}

// Step implements [Simulator].
func (e Embedded) Step(ctx context.Context, id string, req sim.StepRequest) (*sim.StepResult, error) {
	return e.M.Step(ctx, id, req)
}

// Delete implements [Simulator].
func (e Embedded) Delete(ctx context.Context, id string) error { return e.M.Delete(ctx, id) }

// Remote is a [Simulator] over `agentworld serve`'s native API
// (/v1/worlds, /v1/sessions).
type Remote struct {
	// BaseURL is the server's address (http://host:8080).
	BaseURL string
	// APIKey is sent as a bearer token; "" sends none.
	APIKey string
	// HTTP is the client; nil means http.DefaultClient.
	HTTP *http.Client
}

func (r *Remote) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(r.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.APIKey)
	}
	hc := r.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("simulator: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("simulator: %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("simulator: %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(raw))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("simulator: %s %s: %w", method, path, err)
	}
	return nil
}

// World implements [Simulator].
func (r *Remote) World(ctx context.Context, name string) (*world.Spec, error) {
	var s world.Spec
	if err := r.call(ctx, http.MethodGet, "/v1/worlds/"+name, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Create implements [Simulator].
func (r *Remote) Create(ctx context.Context, req sim.CreateRequest) (*sim.Reply, error) {
	body := api.CreateSessionRequest{WorldID: req.WorldID, Seed: req.Seed, Labels: req.Labels}
	var rep sim.Reply
	return &rep, r.call(ctx, http.MethodPost, "/v1/sessions", body, &rep)
}

// Fork implements [Simulator].
func (r *Remote) Fork(ctx context.Context, id string, req sim.ForkRequest) (*sim.Reply, error) {
	body := api.ForkSessionRequest{AtTurn: req.AtTurn, Seed: req.Seed, Labels: req.Labels}
	var rep sim.Reply
	return &rep, r.call(ctx, http.MethodPost, "/v1/sessions/"+id+"/fork", body, &rep)
}

// Step implements [Simulator].
func (r *Remote) Step(ctx context.Context, id string, req sim.StepRequest) (*sim.StepResult, error) {
	body := api.StepSessionRequest{Action: req.Action, Turn: req.Turn}
	var res sim.StepResult
	return &res, r.call(ctx, http.MethodPost, "/v1/sessions/"+id+"/step", body, &res)
}

// Delete implements [Simulator].
func (r *Remote) Delete(ctx context.Context, id string) error {
	return r.call(ctx, http.MethodDelete, "/v1/sessions/"+id, nil, nil)
}
