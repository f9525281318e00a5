package mcpworld

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/worldhooks"
)

// Sessions runs the facade's sessions on a sim.Manager: an MCP session is
// a simulator session, a tools/call one step, recorded like any other.
type Sessions struct {
	M *sim.Manager
}

var _ Simulator = Sessions{}

// Open implements Simulator.
func (s Sessions) Open(ctx context.Context, world string, o SessionOptions) (string, error) {
	rep, err := s.M.Create(ctx, sim.CreateRequest{ID: o.ID, WorldID: world, Seed: o.Seed, Params: o.Params, Labels: o.Labels})
	if err != nil {
		return "", err
	}
	return rep.SessionID, nil
}

// Step implements Simulator.
func (s Sessions) Step(ctx context.Context, id, action string) (*StepOutcome, error) {
	res, err := s.M.Step(ctx, id, sim.StepRequest{Action: json.RawMessage(action)})
	if err != nil {
		return nil, err
	}
	out := &StepOutcome{Observation: res.Observation, Terminated: res.Terminated, Truncated: res.Truncated, Error: res.Info.Error,
		Reward: res.Reward, RewardComponents: res.Info.RewardComponents}
	if raw, ok := res.Info.Extra[worldhooks.ExtraFault]; ok {
		var f perturb.Fault
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, fmt.Errorf("session %s: stored fault: %w", id, err)
		}
		out.Fault = &f
	}
	return out, nil
}

// Close implements Simulator.
func (s Sessions) Close(ctx context.Context, id string) error { return s.M.Delete(ctx, id) }

var _ Resumer = Sessions{}

// Resume implements Resumer: the world of an open session (one this
// node's manager holds or loads from the store).
func (s Sessions) Resume(ctx context.Context, id string) (string, error) {
	st, err := s.M.State(ctx, id)
	if err != nil {
		return "", err
	}
	if st.Status != sim.StatusActive {
		return "", fmt.Errorf("session %s is %s", id, st.Status)
	}
	return st.World, nil
}
