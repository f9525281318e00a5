package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/trajectory"
)

func TestRealenvExportCommand(t *testing.T) {
	recDir, out := t.TempDir(), t.TempDir()
	tr := trajectory.Trajectory{
		ID: "s1", Domain: "terminal", Source: "real:terminal",
		Components: &trajectory.Components{TaskDescription: "a shell", ActionSpace: "keystrokes"},
		Turns: []trajectory.Turn{
			{Action: `[{"keystrokes":"ls\n","duration":1}]`, Observation: "root@sandbox:/app# ls\nroot@sandbox:/app#"},
			{Action: `[]`, Observation: "root@sandbox:/app# ls\nroot@sandbox:/app#"},
		},
	}
	b, _ := json.Marshal(tr)
	if err := os.WriteFile(filepath.Join(recDir, "s1.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	root := New()
	var stdout bytes.Buffer
	root.SetOut(&stdout)
	root.SetArgs([]string{"realenv", "export", "--out", out, recDir})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	recs, err := trajectory.ReadFile(filepath.Join(out, "terminal_test.jsonl"), false)
	if err != nil || len(recs) != 2 {
		t.Fatalf("records: %d, %v", len(recs), err)
	}
	for _, r := range recs {
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(stdout.String(), `"trajectories": 1`) {
		t.Fatalf("stdout: %s", stdout.String())
	}
}
