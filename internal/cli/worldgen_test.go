package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

var variation = regexp.MustCompile(`Variation seed: (\d+)`)

// TestGenerateThenRollout generates a small library with a fake generator
// (a tracker world per candidate with a state task and an answer task,
// some candidates broken JSON), then rolls a policy out on it with
// --curriculum twice: the first run has no history and takes every task;
// the second only those whose pass rate lay strictly between 0 and 1.
func TestGenerateThenRollout(t *testing.T) {
	gen := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		user := r.Messages[len(r.Messages)-1].Content
		if !strings.Contains(r.Messages[0].Content, "design environments") {
			// the world model: close what close_issue names
			if strings.Contains(user, `"name":"close_issue"`) && strings.Contains(user, `"key":"WS-9"`) {
				return fakellm.Reply{Content: `<predicted_observation>{"issue": {"id": "WS-9", "status": "closed"}}</predicted_observation>`}
			}
			return fakellm.Reply{Content: `<predicted_observation>{"error": "bad call"}</predicted_observation>`}
		}
		n := variation.FindStringSubmatch(user)[1]
		if d := n[len(n)-1]; d == '0' || d == '5' {
			return fakellm.Reply{Content: `{"world": {`}
		}
		w := map[string]any{"world": map[string]any{"name": "tracker", "domain": "mcp", "task_description": "An issue tracker's MCP server.",
			"action_space":  []any{map[string]any{"name": "close_issue", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"key": map[string]any{"type": "string"}}}}},
			"initial_state": "Issue WS-9 is open (" + n + ")."},
			"tasks": []any{
				map[string]any{"instruction": "Close WS-9 (" + n + ").", "difficulty": "medium",
					"check":     map[string]any{"state": []any{map[string]any{"entity": "WS-9", "attribute": "status", "value": "closed"}}},
					"reference": []any{map[string]any{"name": "close_issue", "arguments": map[string]any{"key": "WS-9"}}, "done"}},
				map[string]any{"instruction": "Which issue is open on board " + n + "?", "difficulty": "easy",
					"check":     map[string]any{"answer": map[string]any{"items": []string{"WS-9"}}},
					"reference": []any{"WS-9"}},
			}}
		b, _ := json.Marshal(w)
		return fakellm.Reply{Content: string(b)}
	})
	defer gen.Close()
	lib := filepath.Join(t.TempDir(), "lib")
	out, errOut, err := runCLI(t, "world", "generate", "--count", "8", "--generator-url", gen.URL, "--generator-model", "fake-gen", "--out", lib, "--domains", "mcp", "--seed", "5", "--concurrency", "2")
	if err != nil {
		t.Fatal(err, errOut)
	}
	if !strings.Contains(errOut, "estimate: 8 candidates") || !strings.Contains(out, "accepted into") || !strings.Contains(out, "parse") {
		t.Errorf("generate output:\n%s\n%s", out, errOut)
	}
	listed, _, err := runCLI(t, "world", "list", lib, "--kind", "tasks")
	if err != nil {
		t.Fatal(err)
	}
	board := regexp.MustCompile(`Which issue is open on board (\d+)\?`)
	tasks, mixed := strings.Count(listed, "task "), 0
	for _, m := range board.FindAllStringSubmatch(listed, -1) {
		if (m[1][len(m[1])-1]-'0')%2 == 1 {
			mixed++
		}
	}
	if tasks == 0 || mixed == 0 || mixed == tasks {
		t.Fatalf("want some tasks to pass sometimes and some never; %d tasks, %d mixed:\n%s", tasks, mixed, listed)
	}
	// The policy only answers; it never calls a tool, so the state tasks
	// always fail. It answers right in every other episode of the answer
	// tasks of odd boards, and never on even ones; --concurrency 1 runs
	// a group's two episodes one after the other.
	pol := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		user := r.Messages[1].Content
		if m := board.FindStringSubmatch(user); m != nil && (m[1][len(m[1])-1]-'0')%2 == 1 && r.Seq%2 == 1 {
			return fakellm.Reply{Content: "WS-9"}
		}
		return fakellm.Reply{Content: "no idea"}
	})
	defer pol.Close()
	runs := t.TempDir()
	rollout := func(name string) (string, string) {
		out, errOut, err := runCLI(t, "rollout", "--tasks", lib, "--model", gen.URL, "--model-name", "fake-wm", "--policy-url", pol.URL, "--policy-model", "p",
			"--out", filepath.Join(runs, name), "--group-size", "2", "--episode-turns", "2", "--concurrency", "1", "--curriculum")
		if err != nil {
			t.Fatal(err, errOut)
		}
		return out, errOut
	}
	out, errOut = rollout("r1")
	if want := fmt.Sprintf("0 tasks with a pass rate strictly between 0 and 1, %d not tried yet", tasks); !strings.Contains(errOut, want) {
		t.Errorf("first curriculum: want %q in\n%s", want, errOut)
	}
	if want := fmt.Sprintf("%d of %d groups carried signal", mixed, tasks); !strings.Contains(out, want) {
		t.Errorf("first run: want %q in %s", want, out)
	}
	out, errOut = rollout("r2")
	if want := fmt.Sprintf("%d tasks with a pass rate strictly between 0 and 1, 0 not tried yet; left out %d always failed, 0 always passed", mixed, tasks-mixed); !strings.Contains(errOut, want) {
		t.Errorf("second curriculum: want %q in\n%s", want, errOut)
	}
	b, err := os.ReadFile(filepath.Join(runs, "r2", "episodes.jsonl"))
	if err != nil || strings.Count(string(b), "\n") != 2*mixed {
		t.Errorf("second run: %v, %d rows for %d tasks", err, strings.Count(string(b), "\n"), mixed)
	}
	if !strings.Contains(out, fmt.Sprintf("%d of %d groups carried signal", mixed, mixed)) {
		t.Errorf("second run: %s", out)
	}
}
