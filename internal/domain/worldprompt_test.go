package domain

import (
	"strings"
	"testing"
)

func TestRenderWorldPromptEveryDomain(t *testing.T) {
	for _, d := range All {
		p, err := RenderWorldPrompt(d, WorldPromptParts{
			TaskDescription: "TASK-TEXT",
			ActionSpace:     "ACTIONS-TEXT",
			InitialState:    "STATE-TEXT",
			Demonstrations:  "DEMO-TEXT",
		})
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		for _, want := range []string{"TASK-TEXT", "ACTIONS-TEXT", "STATE-TEXT", "DEMO-TEXT", "<predicted_observation>", DefaultSimulationInstruction(d)} {
			if !strings.Contains(p, want) {
				t.Errorf("%s prompt lacks %q:\n%s", d, want, p)
			}
		}
		if DefaultSimulationInstruction(d) == "" {
			t.Errorf("%s has no default rules", d)
		}
		again, _ := RenderWorldPrompt(d, WorldPromptParts{TaskDescription: "TASK-TEXT", ActionSpace: "ACTIONS-TEXT", InitialState: "STATE-TEXT", Demonstrations: "DEMO-TEXT"})
		if again != p {
			t.Errorf("%s prompt is not deterministic", d)
		}
	}
	p, _ := RenderWorldPrompt(Terminal, WorldPromptParts{TaskDescription: "t", ActionSpace: "a", SimulationInstruction: "CUSTOM-RULES"})
	if !strings.Contains(p, "CUSTOM-RULES") || strings.Contains(p, DefaultSimulationInstruction(Terminal)) {
		t.Errorf("custom simulation instruction not used:\n%s", p)
	}
	if strings.Contains(p, "State before the first action") {
		t.Errorf("empty initial state should drop its section:\n%s", p)
	}
	if _, err := RenderWorldPrompt("nope", WorldPromptParts{}); err == nil {
		t.Error("unknown domain accepted")
	}
}
