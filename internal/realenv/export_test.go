package realenv

import (
	"testing"

	"github.com/agentworld/agentworld/examples"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
)

// TestWorldSystemPromptMatchesSimulator pins the promise exported records
// rely on: a recording that carries only components gets, as system_str,
// exactly the system prompt the simulator sends for the same world
// (trajectory renders it without importing the simulator).
func TestWorldSystemPromptMatchesSimulator(t *testing.T) {
	specs, err := world.LoadFS(examples.FS, "worlds")
	if err != nil {
		t.Fatal(err)
	}
	demos := 0
	for name, spec := range specs {
		want, err := sim.SystemPrompt(spec)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := sim.Components(spec)
		demos += len(c.Demonstrations)
		if got, err := trajectory.WorldSystemPrompt(spec.Domain, c); err != nil || got != want {
			t.Errorf("%s: trajectory.WorldSystemPrompt differs from sim.SystemPrompt (err %v)\n got %q\nwant %q", name, err, got, want)
		}
	}
	if demos == 0 {
		t.Fatal("no example world has demonstrations; the check compares nothing")
	}
}
