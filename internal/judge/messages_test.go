package judge

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

func exampleRecords(t *testing.T, name string) []*trajectory.Record {
	t.Helper()
	recs, err := trajectory.ReadFile(filepath.Join("..", "..", "examples", "bench", name+"_test.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func renderMessages(msgs []worldmodel.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("=== " + m.Role + " ===\n")
		if m.Role == "system" {
			// The system prompt is an embedded file; name it instead of
			// repeating it in every golden.
			b.WriteString(systemName(m.Content) + "\n")
			continue
		}
		b.WriteString(m.Content)
		b.WriteString("\n=== end ===\n")
	}
	return b.String()
}

func systemName(p string) string {
	for name, text := range own.system {
		if text == p {
			return "(judge system prompt: " + name + ")"
		}
	}
	for name, text := range own.pairwise {
		if text == p {
			return "(pairwise judge system prompt: " + name + ")"
		}
	}
	return "(unknown system prompt)"
}

// TestMessagesGolden documents the judge user message byte for byte: the
// history heading and the concatenated earlier turns, the current turn,
// the fenced prediction and ground truth with the marker stripped, and the
// closing instructions.
func TestMessagesGolden(t *testing.T) {
	term := exampleRecords(t, "terminal")
	mcp := exampleRecords(t, "mcp")

	noCurrent := *mcp[1]
	noCurrent.CurrentPrompt = ""

	custom := *mcp[0]
	custom.Task = "inhouse/spreadsheet"

	tests := []struct {
		name       string
		rec        *trajectory.Record
		prediction string
	}{
		{"first_turn", term[0], "**Environment Observation:**\nroot@4c1f2e9a7b3d:/app# ls\ncalc.py  test_calc.py\nroot@4c1f2e9a7b3d:/app#"},
		{"history", term[2], "root@4c1f2e9a7b3d:/app# sed -i 's/return a - b/return a + b/' calc.py\nroot@4c1f2e9a7b3d:/app#"},
		{"empty_current_prompt", &noCurrent, "before **Environment Observation:** middle **Environment Observation:**"},
		{"fence_in_prediction", mcp[0], "```json\n{\"content\": []}\n```"},
		{"unknown_domain", &custom, conversation.NoOutput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGolden(t, filepath.Join("testdata", "messages", tt.name+".golden"), []byte(renderMessages(first(Messages(nil, tt.rec, tt.prediction)))))
		})
	}
}

func first(m []worldmodel.Message, _ bool) []worldmodel.Message { return m }

// TestMessagesStructure checks the construction rules independently of the
// golden files: the layout of the official script (history heading and a
// blank line, "# Current Turn:" and a blank line, the labelled fenced
// prediction and ground truth, then the template's instructions, the whole
// stripped).
func TestMessagesStructure(t *testing.T) {
	rec := exampleRecords(t, "terminal")[2] // turn 3
	msgs, generic := Messages(nil, rec, "**Environment Observation:**\nPRED")
	if generic {
		t.Error("terminal judged generically")
	}
	if len(msgs) != 2 || msgs[0].Role != "system" || msgs[1].Role != "user" {
		t.Fatalf("roles: %+v", msgs)
	}
	if want, _ := SystemPrompt("terminal"); msgs[0].Content != want {
		t.Error("system prompt is not the terminal judge prompt")
	}
	u := msgs[1].Content
	wantHistory := HistoryHeading + "\n\n" + rec.Prompt[0] + "\n" + rec.Response[0] + "\n\n" + rec.Prompt[1] + "\n" + rec.Response[1] + "\n\n"
	if !strings.HasPrefix(u, wantHistory) {
		t.Error("history is not prompt[i] + \\n + response[i] + \\n\\n under the heading")
	}
	rest := u[len(wantHistory):]
	wantCurrent := "\n\n" + CurrentHeading + "\n\n" + rec.CurrentPrompt + "\n\n"
	if !strings.HasPrefix(rest, wantCurrent) {
		t.Errorf("current turn block wrong: %q", rest[:min(len(rest), 200)])
	}
	if strings.Contains(u, rec.Prompt[2]) {
		t.Error("the evaluated prompt with its instruction suffix leaked into the judge message")
	}
	rest = rest[len(wantCurrent):]
	wantPred := PredictionLabel + "\n```\nPRED\n```\n\n" + TruthLabel + "\n```\n" + conversation.StripObservationMarker(rec.Response[2]) + "\n```\n\n"
	if !strings.HasPrefix(rest, wantPred) {
		t.Errorf("prediction/truth blocks wrong: %q", rest[:min(len(rest), 300)])
	}
	if !strings.HasSuffix(u, "never below 1 on any dimension.") {
		t.Error("the manipulation note does not close the message")
	}
	if u != strings.TrimSpace(u) {
		t.Error("message not stripped")
	}
	// History keeps its markers.
	if !strings.Contains(u, rec.Response[0]) || !strings.HasPrefix(rec.Response[0], conversation.ObservationMarker) {
		t.Error("history observation lost its marker")
	}
}

func TestSystemPrompt(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range domain.All {
		p, generic := SystemPrompt(string(d))
		if generic || p == "" {
			t.Errorf("%s: generic=%v", d, generic)
		}
		if seen[p] {
			t.Errorf("%s: prompt shared with another domain", d)
		}
		seen[p] = true
		for _, must := range []string{"Format", "Factuality", "Consistency", "Realism", "Quality", "<final_evaluation>", "```json", "Deterministic content", "Pre-existing content", "Runtime metadata", "Manipulation"} {
			if !strings.Contains(p, must) {
				t.Errorf("%s prompt lacks %q", d, must)
			}
		}
	}
	if p, generic := SystemPrompt("Terminal"); generic || p != own.system["terminal"] {
		t.Error("domain names are case-insensitive")
	}
	if p, generic := SystemPrompt("x/y/os"); generic || p != own.system["os"] {
		t.Error("a task path resolves to its last part")
	}
	if p, generic := SystemPrompt("spreadsheet"); !generic || p != own.system["generic"] {
		t.Error("unknown domain must get the generic prompt")
	}
	if _, generic := SystemPrompt(""); !generic {
		t.Error("empty domain must get the generic prompt")
	}
}

func TestMessagesOutOfRangeDoesNotPanic(t *testing.T) {
	rec := &trajectory.Record{Task: "mcp", TurnIdx: 9, Prompt: []string{"a"}, Response: []string{"b"}}
	msgs, _ := Messages(nil, rec, "p")
	if len(msgs) != 2 {
		t.Fatal(len(msgs))
	}
}
