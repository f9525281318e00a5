package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"

	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/trainset"
)

// TestRLExportFollowsSuffix: --mode rl writes JSON lines to .jsonl and
// Parquet to .parquet, the same rows; another suffix needs --format.
func TestRLExportFollowsSuffix(t *testing.T) {
	dir := t.TempDir()
	traj := filepath.Join(dir, "traj.jsonl")
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "bench", "*_test.jsonl"))
	if _, stderr, err := runCLI(t, append([]string{"data", "convert", "--from", "bench", "-o", traj}, files...)...); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	pq, jl := filepath.Join(dir, "rl.parquet"), filepath.Join(dir, "rl.jsonl")
	for _, out := range []string{pq, jl} {
		if _, stderr, err := runCLI(t, "data", "export", "--mode", "rl", "--seed", "3", "-o", out, traj); err != nil {
			t.Fatalf("%s: %v\n%s", out, err, stderr)
		}
	}
	want, err := parquet.ReadFile[trainset.RLRow](pq)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(jl)
	var got []trainset.RLRow
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r trainset.RLRow
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("%s is not JSON lines: %v", jl, err)
		}
		got = append(got, r)
	}
	if d := cmp.Diff(want, got); d != "" || len(got) != 9 {
		t.Errorf("%d rows; JSONL rows differ from the Parquet ones:\n%s", len(got), d)
	}
	// ms-swift reads a prompt column as one string: --format swift puts the
	// prompt under messages.
	sw := filepath.Join(dir, "swift.jsonl")
	if _, stderr, err := runCLI(t, "data", "export", "--mode", "rl", "--format", "swift", "--seed", "3", "-o", sw, traj); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	sb, _ := os.ReadFile(sw)
	var first map[string]json.RawMessage
	_ = json.Unmarshal(bytes.SplitN(sb, []byte("\n"), 2)[0], &first)
	var msgs []expand.Message
	if _, has := first["prompt"]; has || json.Unmarshal(first["messages"], &msgs) != nil || cmp.Diff(want[0].Prompt, msgs) != "" {
		t.Errorf("--format swift: %.300s", sb)
	}
	if _, _, err := runCLI(t, "data", "export", "--mode", "rl", "-o", filepath.Join(dir, "rl.data"), traj); err == nil || !strings.Contains(err.Error(), "--format parquet or jsonl") {
		t.Errorf("an unknown suffix: %v", err)
	}
	if _, _, err := runCLI(t, "data", "export", "--mode", "rl", "--format", "parquet", "-o", filepath.Join(dir, "rl.data"), traj); err != nil {
		t.Errorf("--format parquet: %v", err)
	}
}

// TestRLWarmUpMix: the mixed file has the requested share of the agent's
// rows, every row of both kinds intact and routable by data_source, the
// same bytes for the same seed; an agent row that claims the world-model
// prefix is refused, naming its line.
func TestRLWarmUpMix(t *testing.T) {
	dir := t.TempDir()
	traj := filepath.Join(dir, "traj.jsonl")
	var tb bytes.Buffer
	for i := range 60 {
		tr := sayTrajectory(fmt.Sprintf("t%02d", i), "test", "w", i, 3)
		line, _ := json.Marshal(tr)
		tb.Write(append(line, '\n'))
	}
	if err := os.WriteFile(traj, tb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, "agent.jsonl")
	var ab bytes.Buffer
	for i := range 500 {
		fmt.Fprintf(&ab, `{"data_source": "swe-gym", "prompt": [{"role": "user", "content": "task %d"}], "reward_model": {"ground_truth": "%d"}, "agent_only": true}`+"\n", i, i)
	}
	if err := os.WriteFile(agent, ab.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	mix := func(name, seed string) []byte {
		out := filepath.Join(dir, name)
		if _, stderr, err := runCLI(t, "data", "export", "--mode", "rl", "--seed", seed, "--mix-rows", agent, "--mix-ratio", "0.75", "-o", out, traj); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		b, _ := os.ReadFile(out)
		return b
	}
	a := mix("mix.jsonl", "5")
	var wm, mine int
	for i, l := range bytes.Split(bytes.TrimSpace(a), []byte("\n")) {
		var row map[string]any
		if err := json.Unmarshal(l, &row); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		switch ds := row["data_source"].(string); {
		case strings.HasPrefix(ds, "agentworld/"):
			wm++
			if row["reward_model"].(map[string]any)["ground_truth"] == "" {
				t.Errorf("line %d: a world-model row without its ground truth", i+1)
			}
		case ds == "swe-gym" && row["agent_only"] == true:
			mine++
		default:
			t.Errorf("line %d: data_source %q", i+1, ds)
		}
	}
	// 60 world-model rows, so 180 of the agent's at 75%.
	if wm != 60 || mine != 180 {
		t.Errorf("%d world-model and %d agent rows, want 60 and 180 (75%% agent)", wm, mine)
	}
	if b := mix("again.jsonl", "5"); !bytes.Equal(a, b) {
		t.Error("the same seed mixed otherwise")
	}
	if b := mix("other.jsonl", "6"); bytes.Equal(a, b) {
		t.Error("another seed mixed the same")
	}
	bad := filepath.Join(dir, "bad.jsonl")
	_ = os.WriteFile(bad, []byte(`{"data_source": "swe-gym"}`+"\n"+`{"data_source": "agentworld/terminal"}`+"\n"), 0o644)
	if _, _, err := runCLI(t, "data", "export", "--mode", "rl", "--mix-rows", bad, "--mix-ratio", "0.5", "-o", filepath.Join(dir, "x.jsonl"), traj); err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Errorf("an agent row with the world-model prefix: %v", err)
	}
}
