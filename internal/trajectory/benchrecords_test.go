package trajectory

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/domain"
)

func TestRecordSystemPromptChoice(t *testing.T) {
	comps := &Components{TaskDescription: "A notes server.", ActionSpace: "list_notes",
		Demonstrations: []Demonstration{{Action: " list_notes ", Observation: "[]\n"}}}
	world, err := WorldSystemPrompt(domain.MCP, *comps)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(world, "## Example 1\n**Action:**\nlist_notes\n**Environment Observation:**\n[]") {
		t.Fatalf("world prompt lacks the rendered demonstration:\n%s", world)
	}
	custom := func(d domain.Domain, c Components) (string, error) { return string(d) + ":" + c.TaskDescription, nil }
	for _, tc := range []struct {
		name string
		tr   Trajectory
		sp   SystemPromptFunc
		want string
		err  string
	}{
		{"own prompt wins", Trajectory{Domain: "mcp", SystemPrompt: "own", Components: comps}, nil, "own", ""},
		{"components by the simulator template", Trajectory{Domain: "mcp", SystemPrompt: " \n", Components: comps}, nil, world, ""},
		{"components by a given renderer", Trajectory{Domain: "MCP", Components: comps}, custom, "mcp:A notes server.", ""},
		{"neither", Trajectory{Domain: "mcp"}, nil, "", "system_prompt or components"},
		{"unknown domain", Trajectory{Domain: "moon", Components: comps}, nil, "", "unknown domain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.tr.RecordSystemPrompt(tc.sp)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestBenchRecords(t *testing.T) {
	tr := &Trajectory{ID: "s-1", Domain: "Terminal", SystemPrompt: "sys", Turns: []Turn{
		{Action: "ls", Observation: "a.txt"},
		// Text already in the published form (taken from records) is kept.
		{Action: "### Turn 2\n**Action:**\npwd", Observation: "**Environment Observation:**\n/app"},
	}}
	recs, err := BenchRecords(tr, 9, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, r := range recs {
		if err := WriteRecord(&sb, r); err != nil {
			t.Fatal(err)
		}
	}
	const lists = `"prompt":["### Turn 1\n**Action:**\nls","### Turn 2\n**Action:**\npwd"],"response":["**Environment Observation:**\na.txt","**Environment Observation:**\n/app"]`
	want := `{"task":"terminal","id":9,` + lists + `,"current_prompt":"### Turn 1\n**Action:**\nls","system_str":"sys","turn_idx":1,"total_turns":2,"trajectory_id":"s-1"}` + "\n" +
		`{"task":"terminal","id":9,` + lists + `,"current_prompt":"### Turn 2\n**Action:**\npwd","system_str":"sys","turn_idx":2,"total_turns":2,"trajectory_id":"s-1"}` + "\n"
	if got := sb.String(); got != want {
		t.Fatalf("records\n got %s\nwant %s", got, want)
	}
	if _, err := BenchRecords(&Trajectory{ID: "e", Domain: "mcp", SystemPrompt: "s"}, 1, nil); !errors.Is(err, ErrMissingField) {
		t.Fatalf("empty trajectory: err = %v", err)
	}
}
