package reward

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// TestTrainerShims runs the Python shims of examples/trainers against a
// live reward server, calling each the way its trainer does (the trainer
// packages themselves are not needed: verl and TRL call plain functions;
// ms-swift's registry is stood in for by a two-line module).
func TestTrainerShims(t *testing.T) {
	py := testkit.LookPath(t, "python3", "install python3 (Debian: apt-get install python3)")
	rec := &recordingJudge{}
	srv, _ := newTestServer(t, &Options{Judge: rec, JudgeModel: "test-judge", RetryWait: 1}, &HandlerOptions{APIKey: "secret"})
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
reminder = "\n\nPredict the environment's observation for this action. Put it inside <predicted_observation></predicted_observation>."
first = "### Turn 1\n**Action:**\n[{\"keystrokes\": \"pwd\\n\", \"duration\": 0.1}]"
action = "### Turn 2\n**Action:**\n[{\"keystrokes\": \"ls\\n\", \"duration\": 0.1}]"
history = [{"role": "user", "content": first + reminder},
           {"role": "assistant", "content": "**Environment Observation:**\nroot@box:/app# pwd\n/app-HISTORY\nroot@box:/app#"},
           {"role": "user", "content": action + reminder}]
prompt = [{"role": "system", "content": "You simulate a shell."}] + history
ei = {"action": action, "messages": history, "id": "t#2", "num_turns": None}
rm = {"ground_truth": truth, "style": "model"}
out = {
    "verl": compute_score("agentworld/terminal", good, truth, ei),
    "trl": agentworld_reward(prompts=[prompt, prompt], completions=[[{"role": "assistant", "content": good}], [{"role": "assistant", "content": bad}]],
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
	// Every shim passed the history: each judge conversation holds the
	// earlier turn (two predictions, good and bad: two conversations, the
	// other three items answered from the cache, keyed by the whole
	// conversation).
	if n := rec.calls.Load(); n != 2 || rec.withHistory.Load() != n {
		t.Errorf("%d judge calls, %d of them with the history; want 2 and 2", n, rec.withHistory.Load())
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

// recordingJudge answers like verdictJudge and counts the conversations
// that hold the shims' test history.
type recordingJudge struct{ calls, withHistory atomic.Int64 }

func (r *recordingJudge) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	r.calls.Add(1)
	if strings.Contains(req.Messages[len(req.Messages)-1].Content, "/app-HISTORY") {
		r.withHistory.Add(1)
	}
	return verdictJudge{}.Complete(ctx, req)
}
