package mcpworld

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/perturb"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldhooks"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// TestPerturbedWorldOverMCP: perturbation rules act on MCP tool calls. A
// JSON-RPC fault reaches the client as a protocol error without a model
// call; an instructed rule puts its control text in the model's last
// message; both are recorded on the session's steps.
func TestPerturbedWorldOverMCP(t *testing.T) {
	spec := *trackerSpec
	spec.Name = "perturbed"
	spec.Perturbations = &perturb.Config{Rules: []perturb.Rule{
		{Name: "down", When: perturb.When{Tool: "delete_issue"}, Inject: perturb.Inject{Kind: perturb.JSONRPCError, Code: -32000, Message: "storage offline"}},
		{Name: "throttle", When: perturb.When{Tool: "get_issue"}, Inject: perturb.Inject{Kind: perturb.RateLimit}},
	}}
	model := fakellm.New(fakeWorldModel)
	defer model.Close()
	m := sim.New(&sim.Options{
		Worlds:   map[string]*world.Spec{spec.Name: &spec},
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(worldmodel.New(model.URL, "fake", &worldmodel.Options{MaxRetries: -1}), &sim.ModelOptions{MaxTokens: 256})},
		Hooks:    []sim.StepHook{worldhooks.NewPerturbations(nil)},
	})
	defer m.Close(context.Background())
	rs := &recordingSessions{Sessions: Sessions{M: m}}
	f, err := NewFacade(rs, []*world.Spec{&spec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	cs := connectInMemory(t, f, spec.Name)
	ctx := context.Background()

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_issue", Arguments: map[string]any{"id": 1}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32000 || rpcErr.Message != "storage offline" {
		t.Fatalf("fault: %v", err)
	}
	if n := model.Count(); n != 0 {
		t.Fatalf("the fault called the model %d times", n)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_issue", Arguments: map[string]any{"id": 2}}); err != nil {
		t.Fatal(err)
	}
	reqs := model.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].Messages[len(reqs[0].Messages)-1].Content, perturb.Instruction(perturb.RateLimit)) {
		t.Fatalf("rate-limit instruction not in the last message: %+v", reqs)
	}
	_ = cs.Close()

	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Both steps are recorded with the rule that fired.
	if len(rs.opened) != 1 {
		t.Fatalf("opened %v", rs.opened)
	}
	tr, err := m.Trajectory(ctx, rs.opened[0])
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, turn := range tr.Turns {
		var info sim.StepInfo
		if err := json.Unmarshal(turn.Meta["info"], &info); err != nil {
			t.Fatal(err)
		}
		rules = append(rules, info.Labels[perturb.LabelRules])
	}
	if strings.Join(rules, ";") != "down;throttle" {
		t.Errorf("recorded rule labels %q", rules)
	}
}

// recordingSessions remembers the simulator sessions the facade opened.
type recordingSessions struct {
	Sessions
	opened []string
}

func (r *recordingSessions) Open(ctx context.Context, w string, o SessionOptions) (string, error) {
	id, err := r.Sessions.Open(ctx, w, o)
	if err == nil {
		r.opened = append(r.opened, id)
	}
	return id, err
}
