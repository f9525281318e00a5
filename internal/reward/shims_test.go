package reward

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit"
)

// TestTrainerShims runs the Python shims of examples/trainers against a
// live reward server, calling each the way its trainer does (the trainer
// packages themselves are not needed: verl and TRL call plain functions;
// ms-swift's registry is stood in for by a two-line module).
func TestTrainerShims(t *testing.T) {
	py := testkit.LookPath(t, "python3", "install python3 (Debian: apt-get install python3)")
	srv, _ := newTestServer(t, nil, &HandlerOptions{APIKey: "secret"})
	dir, _ := filepath.Abs(filepath.Join("..", "..", "examples", "trainers"))
	stub := t.TempDir()
	if err := os.MkdirAll(filepath.Join(stub, "swift"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(stub, "swift", "__init__.py"), nil, 0o644)
	_ = os.WriteFile(filepath.Join(stub, "swift", "rewards.py"), []byte("class ORM:\n    pass\norms = {}\n"), 0o644)
	script := `
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from verl_reward import compute_score
from trl_reward import agentworld_reward
import swift_orm
from swift.rewards import orms

truth = "root@box:/app# ls\ncalc.py\nroot@box:/app#"
good = "<think>x</think><predicted_observation>" + truth + "</predicted_observation>"
bad = "<predicted_observation>root@box:/app# ls\nmain.py\nroot@box:/app#</predicted_observation>"
action = "### Turn 1\n**Action:**\n[{\"keystrokes\": \"ls\\n\", \"duration\": 0.1}]"
ei = {"action": action, "id": "t#1", "num_turns": None}
rm = {"ground_truth": truth, "style": "model"}
out = {
    "verl": compute_score("agentworld/terminal", good, truth, ei),
    "trl": agentworld_reward(prompts=[[], []], completions=[[{"role": "assistant", "content": good}], [{"role": "assistant", "content": bad}]],
                             completion_ids=[[], []], data_source=["agentworld/terminal"] * 2, reward_model=[rm, rm], extra_info=[ei, ei],
                             trainer_state=None, log_extra=None, log_metric=lambda k, v: None),
    "swift": orms["agentworld"]()([good, bad], data_source=["agentworld/terminal"] * 2, reward_model=[rm, rm], extra_info=[ei, ei]),
}
print(json.dumps(out))
`
	cmd := exec.Command(py, "-c", script, dir, stub)
	cmd.Env = append(os.Environ(), "AGENTWORLD_REWARD_URL="+srv.URL, "AGENTWORLD_API_KEY=secret")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	var got struct {
		Verl  map[string]any `json:"verl"`
		TRL   []float64      `json:"trl"`
		Swift []float64      `json:"swift"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(b))), &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	want := []float64{25, 0.9 * 16}
	if got.Verl["score"] != 25.0 || got.Verl["rule"] != 25.0 || len(got.TRL) != 2 || got.TRL[0] != want[0] || got.TRL[1] != want[1] || len(got.Swift) != 2 || got.Swift[1] != want[1] {
		t.Errorf("%s", b)
	}
}
