package mcpworld

import (
	"context"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldhooks"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// testWorldHarness is the tracker world served by the facade over a real
// session manager whose world model is a fake OpenAI-compatible server
// (fakellm). A harness given a model URL (the stdio child) uses that
// server; otherwise it starts one and owns it.
type testWorldHarness struct {
	facade   *Facade
	world    string
	modelURL string
	model    *fakellm.Server // nil in the child
	manager  *sim.Manager
}

// fakeWorldModel answers like a world model simulating the tracker.
func fakeWorldModel(r *fakellm.Request) fakellm.Reply {
	last := r.Messages[len(r.Messages)-1].Content
	obs := `{"title":"Crash on start","status":"open"}`
	if strings.Contains(last, `"name":"delete_issue"`) {
		obs = "Error: issue 3 is locked by a running export"
	}
	return fakellm.Reply{Content: "<think>simulate</think><predicted_observation>" + obs + "</predicted_observation>", FinishReason: "stop"}
}

func newTestWorldHarness(_ context.Context, modelURL string) (*testWorldHarness, error) {
	h := &testWorldHarness{world: "tracker", modelURL: modelURL}
	if modelURL == "" {
		h.model = fakellm.New(fakeWorldModel)
		h.modelURL = h.model.URL
	}
	client := worldmodel.New(h.modelURL, "fake-world-model", &worldmodel.Options{MaxRetries: -1})
	h.manager = sim.New(&sim.Options{
		Worlds:   map[string]*world.Spec{"tracker": trackerSpec},
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(client, &sim.ModelOptions{MaxTokens: 512})},
		Hooks:    []sim.StepHook{worldhooks.NewPerturbations(nil)},
	})
	f, err := NewFacade(Sessions{M: h.manager}, []*world.Spec{trackerSpec}, nil)
	if err != nil {
		return nil, err
	}
	h.facade = f
	return h, nil
}

func (h *testWorldHarness) Close() {
	_ = h.facade.Close(context.Background())
	_ = h.manager.Close(context.Background())
	if h.model != nil {
		h.model.Close()
	}
}

// checkSteps: every client's two valid calls reached the world model (the
// schema violation did not), each as the last user message of a request
// whose system prompt holds the world's tools.
func (h *testWorldHarness) checkSteps(t *testing.T) {
	t.Helper()
	reqs := h.model.Requests()
	if len(reqs) != 8 {
		t.Fatalf("world model received %d requests, want 8 (4 clients × 2 valid calls)", len(reqs))
	}
	var actions []string
	for _, r := range reqs {
		if !strings.Contains(r.Messages[0].Content, `"name":"get_issue"`) {
			t.Errorf("system prompt lacks the tool definitions:\n%s", r.Messages[0].Content)
		}
		last := r.Messages[len(r.Messages)-1].Content
		for _, a := range []string{`{"arguments":{"id":7},"name":"get_issue"}`, `{"arguments":{"id":3},"name":"delete_issue"}`} {
			if strings.Contains(last, a) {
				actions = append(actions, a)
			}
		}
		if strings.Contains(last, `"seven"`) {
			t.Error("a schema-violating call reached the world model")
		}
	}
	if len(actions) != 8 {
		t.Errorf("actions seen by the model: %v", actions)
	}
}
