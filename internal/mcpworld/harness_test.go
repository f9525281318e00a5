package mcpworld

import (
	"context"
	"testing"

	"github.com/agentworld/agentworld/internal/world"
)

// testWorldHarness is a servable world behind the facade. This version
// answers from a scripted simulator; modelURL is empty.
type testWorldHarness struct {
	facade   *Facade
	world    string
	modelURL string
	sim      *fakeSim
}

func newTestWorldHarness(_ context.Context, modelURL string) (*testWorldHarness, error) {
	sim := &fakeSim{answer: fakeAnswers}
	f, err := NewFacade(sim, []*world.Spec{trackerSpec}, nil)
	if err != nil {
		return nil, err
	}
	return &testWorldHarness{facade: f, world: "tracker", modelURL: modelURL, sim: sim}, nil
}

func (h *testWorldHarness) Close() { _ = h.facade.Close(context.Background()) }

func (h *testWorldHarness) checkSteps(t *testing.T) {
	steps, _ := h.sim.snapshot()
	// go/http and npm/http ran in process: two valid calls each.
	if len(steps) != 4 {
		t.Errorf("in-process steps %v", steps)
	}
}
