package bench

import (
	"context"
	"testing"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// TestCopyBaselineAlwaysAnswers: later turns copy the last observation; a
// first turn copies the system prompt's initial state, or says there is
// nothing to copy — never an empty answer a run would count as a model
// fault.
func TestCopyBaselineAlwaysAnswers(t *testing.T) {
	sys := "You simulate a shell.\n\n## Task\nFix it.\n\n## Initial state\nroot@box:/app# \n\n## How to simulate\nBe exact."
	for _, tc := range []struct {
		name string
		msgs []worldmodel.Message
		want string
	}{
		{"later turn", []worldmodel.Message{{Role: "system", Content: sys}, {Role: "user", Content: "ls"}, {Role: "assistant", Content: "a.py"}, {Role: "user", Content: "ls"}}, conversation.Answer("a.py")},
		{"first turn", []worldmodel.Message{{Role: "system", Content: sys}, {Role: "user", Content: "ls"}}, conversation.Answer("root@box:/app#")},
		{"first turn, no initial state", []worldmodel.Message{{Role: "system", Content: "## Task\nx"}, {Role: "user", Content: "ls"}}, conversation.Answer(NothingToCopy)},
	} {
		r, err := CopyBaseline{}.Complete(context.Background(), worldmodel.Request{Messages: tc.msgs})
		if err != nil || r.Content != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, r.Content, err, tc.want)
		}
	}
}
