package mcpworld

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// TestRewardInMeta: a world whose spec penalizes tool errors reports the
// step's reward in the tool result's _meta; a step nobody scored has none.
func TestRewardInMeta(t *testing.T) {
	model := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		obs := `{"content":[{"type":"text","text":"{\"title\":\"Crash on start\"}"}],"structuredContent":{"title":"Crash on start"},"isError":false}`
		if last := r.Messages[len(r.Messages)-1].Content; strings.Contains(last, "delete_issue") {
			obs = `{"content":[{"type":"text","text":"issue 3 is locked"}],"isError":true}`
		}
		return fakellm.Reply{Content: "<predicted_observation>" + obs + "</predicted_observation>", FinishReason: "stop"}
	})
	defer model.Close()
	spec := *trackerSpec
	spec.Reward = &world.Reward{ToolError: -0.5}
	m := sim.New(&sim.Options{
		Worlds:   map[string]*world.Spec{"tracker": &spec},
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(worldmodel.New(model.URL, "fake", &worldmodel.Options{MaxRetries: -1}), &sim.ModelOptions{MaxTokens: 256})},
	})
	defer m.Close(context.Background())
	f, err := NewFacade(Sessions{M: m}, []*world.Spec{&spec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	cs := connectInMemory(t, f, "tracker")
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_issue", Arguments: map[string]any{"id": 3}})
	if err != nil {
		t.Fatal(err)
	}
	comps, _ := res.Meta[MetaRewardComponents].(map[string]any)
	if !res.IsError || res.Meta[MetaReward] != -0.5 || comps["tool_error"] != -0.5 {
		t.Errorf("error call: isError %v meta %v", res.IsError, res.Meta)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_issue", Arguments: map[string]any{"id": 7}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.Meta[MetaReward]; ok || res.IsError {
		t.Errorf("clean call: isError %v meta %v", res.IsError, res.Meta)
	}
}
