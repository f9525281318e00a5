package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

var variation = regexp.MustCompile(`Variation seed: (\d+)`)

// TestGenerateThenRollout generates a small library with a fake generator
// (a good tracker world per candidate, some broken JSON),
// then rolls a policy out on it: every accepted task runs in the world
// that carries its check.
func TestGenerateThenRollout(t *testing.T) {
	gen := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		user := r.Messages[len(r.Messages)-1].Content
		if strings.Contains(user, "fiction") || !strings.Contains(r.Messages[0].Content, "design environments") {
			// the world model: close what close_issue names
			if strings.Contains(user, `"name":"close_issue"`) && strings.Contains(user, `"key":"WS-9"`) {
				return fakellm.Reply{Content: `<predicted_observation>{"issue": {"id": "WS-9", "status": "closed"}}</predicted_observation>`}
			}
			return fakellm.Reply{Content: `<predicted_observation>{"error": "bad call"}</predicted_observation>`}
		}
		n := variation.FindStringSubmatch(user)[1]
		if d := n[len(n)-1]; d == '0' || d == '5' || d == '7' {
			return fakellm.Reply{Content: `{"world": {`}
		}
		w := map[string]any{"world": map[string]any{"name": "tracker", "domain": "mcp", "task_description": "An issue tracker's MCP server.",
			"action_space":  []any{map[string]any{"name": "close_issue", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"key": map[string]any{"type": "string"}}}}},
			"initial_state": "Issue WS-9 is open (" + n + ")."},
			"tasks": []any{map[string]any{"instruction": "Close WS-9 (" + n + ").", "difficulty": "medium",
				"check":     map[string]any{"state": []any{map[string]any{"entity": "WS-9", "attribute": "status", "value": "closed"}}},
				"reference": []any{map[string]any{"name": "close_issue", "arguments": map[string]any{"key": "WS-9"}}, "done"}}}}
		b, _ := json.Marshal(w)
		return fakellm.Reply{Content: string(b)}
	})
	defer gen.Close()
	lib := filepath.Join(t.TempDir(), "lib")
	out, errOut, err := runCLI(t, "world", "generate", "--count", "6", "--generator-url", gen.URL, "--generator-model", "fake-gen", "--out", lib, "--domains", "mcp", "--seed", "5", "--concurrency", "2")
	if err != nil {
		t.Fatal(err, errOut)
	}
	if !strings.Contains(errOut, "estimate: 6 candidates") || !strings.Contains(out, "accepted into") || !strings.Contains(out, "parse") {
		t.Errorf("generate output:\n%s\n%s", out, errOut)
	}
	listed, _, err := runCLI(t, "world", "list", lib, "--kind", "tasks")
	if err != nil || strings.Count(listed, "task ") == 0 {
		t.Fatalf("list: %v\n%s", err, listed)
	}
	pol := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "done"}
	})
	defer pol.Close()
	run := filepath.Join(t.TempDir(), "run")
	out, errOut, err = runCLI(t, "rollout", "--tasks", lib, "--model", gen.URL, "--model-name", "fake-wm", "--policy-url", pol.URL, "--policy-model", "p", "--out", run, "--group-size", "2", "--episode-turns", "2")
	if err != nil {
		t.Fatal(err, errOut)
	}
	if !strings.Contains(out, "episodes in") {
		t.Errorf("rollout output: %s", out)
	}
	b, err := os.ReadFile(filepath.Join(run, "episodes.jsonl"))
	if err != nil || strings.Count(string(b), "\n") != 2*strings.Count(listed, "task ") {
		t.Errorf("episodes: %v, %d rows for %d tasks", err, strings.Count(string(b), "\n"), strings.Count(listed, "task "))
	}
}
