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
	_ = os.WriteFile(filepath.Join(stub, "swift", "rewards.py"), []byte("class ORM:\n    def __init__(self, args=None, **kwargs):\n        self.args = args\norms = {}\n"), 0o644)
	script := `
import importlib.util, json, os, sys
sys.path[:0] = [sys.argv[2]]
# verl loads the reward file by path (verl/utils/import_utils.py), its folder not on sys.path
spec = importlib.util.spec_from_file_location("custom_module", os.path.join(sys.argv[1], "verl_reward.py"))
verl_reward = importlib.util.module_from_spec(spec)
spec.loader.exec_module(verl_reward)
compute_score = verl_reward.compute_score
sys.path[:0] = [sys.argv[1]]
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
    # a warm-up mix: an agent's own row goes to its own reward function
    "verl_other": compute_score("openai/gsm8k", "42", "42", {"index": 1}),
    "trl": agentworld_reward(prompts=[prompt, prompt], completions=[[{"role": "assistant", "content": good}], [{"role": "assistant", "content": bad}]],
                             completion_ids=[[], []], data_source=["agentworld/terminal"] * 2, reward_model=[rm, rm], extra_info=[ei, ei],
                             trainer_state=None, log_extra=None, log_metric=lambda k, v: None),
    # as ms-swift 3602360 builds (orms[name](args=args)) and calls an ORM: completions, then every
    # column batched, messages (here renamed from prompt by --columns) ending with the completion
    "swift": orms["agentworld"](args=None)([good, bad], messages=[prompt + [{"role": "assistant", "content": c}] for c in (good, bad)],
                                         data_source=["agentworld/terminal"] * 2, reward_model=[rm, rm],
                                         extra_info=[{"id": "t#2"}] * 2, trainer_state=None),
}
print(json.dumps(out))
`
	other := filepath.Join(stub, "mine.py")
	_ = os.WriteFile(other, []byte("def score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n    return {'score': 7.0, 'source': data_source}\n"), 0o644)
	// verl loads the reward file by path: run it from elsewhere, with only
	// the stubs on sys.path, so its own import of agentworld_reward must
	// find its folder by itself.
	cmd := exec.Command(py, "-c", script, dir, stub)
	cmd.Dir = stub
	cmd.Env = append(os.Environ(), "AGENTWORLD_REWARD_URL="+srv.URL, "AGENTWORLD_API_KEY=secret", "AGENTWORLD_OTHER_REWARD="+other+":score")
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
		Verl      map[string]any `json:"verl"`
		VerlOther map[string]any `json:"verl_other"`
		TRL       []float64      `json:"trl"`
		Swift     []float64      `json:"swift"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(b))), &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if got.VerlOther["score"] != 7.0 || got.VerlOther["source"] != "openai/gsm8k" {
		t.Errorf("a row that is not the world model's reached %v, want the user's reward function", got.VerlOther)
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
