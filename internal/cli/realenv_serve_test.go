package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/realenv"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

func postJSON(t *testing.T, url string, body any, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %v\n%s", url, err, raw)
		}
	}
	if resp.StatusCode/100 != 2 {
		t.Logf("%s: %d %s", url, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// TestServeRealTasks serves the example tasks through the session API:
// a task world runs on the real terminal, and a world-model session
// shadowed by the real terminal returns real screens with divergence.
func TestServeRealTasks(t *testing.T) {
	if err := realenv.ProbeSandbox(); err != nil {
		testkit.Missing(t, "the sandbox real terminal sessions need", err, "install bubblewrap and tmux (.ci/setup.d does)")
	}
	fake := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "<predicted_observation>root@sandbox:/app# ls\nroot@sandbox:/app#</predicted_observation>"}
	})
	defer fake.Close()
	_, srv := startTestServe(t, func(f *simFlags) {
		f.cfg.Model, f.cfg.ModelName, f.cfg.MaxTokens = fake.URL, "fake", 256
		f.real.tasksDir = filepath.Join("..", "..", "examples", "tasks")
	})

	var created struct {
		SessionID   string `json:"session_id"`
		Observation string `json:"observation"`
		Info        struct {
			Backend string `json:"backend"`
		} `json:"info"`
	}
	if code := postJSON(t, srv.URL+"/v1/sessions", map[string]any{"world_id": "hello-file"}, &created); code/100 != 2 {
		t.Fatalf("create: %d", code)
	}
	if created.Info.Backend != realenv.BackendTerminal || created.Observation != "root@sandbox:/app#" {
		t.Fatalf("created %+v", created)
	}
	var step struct {
		Observation string `json:"observation"`
		Info        struct {
			Backend string                     `json:"backend"`
			Extra   map[string]json.RawMessage `json:"extra"`
		} `json:"info"`
	}
	action := `[{"keystrokes":"echo 'hello agentworld' > greeting.txt; cat greeting.txt\n","duration":1}]`
	if code := postJSON(t, srv.URL+"/v1/sessions/"+created.SessionID+"/step", map[string]any{"action": action}, &step); code/100 != 2 {
		t.Fatalf("step: %d", code)
	}
	if !strings.Contains(step.Observation, "\nhello agentworld\nroot@sandbox:/app#") {
		t.Fatalf("real step: %+v", step)
	}

	if code := postJSON(t, srv.URL+"/v1/sessions", map[string]any{"world_id": "hello-file", "backend": "model", "shadow": "real"}, &created); code/100 != 2 {
		t.Fatalf("create shadow: %d", code)
	}
	if code := postJSON(t, srv.URL+"/v1/sessions/"+created.SessionID+"/step", map[string]any{"action": `[{"keystrokes":"ls\n","duration":1}]`}, &step); code/100 != 2 {
		t.Fatalf("shadow step: %d", code)
	}
	var sh realenv.Shadow
	if err := json.Unmarshal(step.Info.Extra["shadow"], &sh); err != nil || step.Observation != "root@sandbox:/app# ls\nroot@sandbox:/app#" || !sh.Divergence.Exact {
		t.Fatalf("shadow step %+v (%v)", step, err)
	}
	if fake.Count() != 1 {
		t.Fatalf("world model asked %d times", fake.Count())
	}
}

// TestServeRealTaskReward: a task served on the real terminal ends with the
// task's check as its reward — 1 after the oracle's actions, 0 for an
// episode that ends without solving it — on the native API and on OpenEnv
// /step.
func TestServeRealTaskReward(t *testing.T) {
	if err := realenv.ProbeSandbox(); err != nil {
		testkit.Missing(t, "the sandbox real terminal sessions need", err, "install bubblewrap and tmux (.ci/setup.d does)")
	}
	_, srv := startTestServe(t, func(f *simFlags) {
		f.real.tasksDir = filepath.Join("..", "..", "examples", "tasks")
	})
	tasks, err := realenv.LoadTasks(filepath.Join("..", "..", "examples", "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	var oracle []string
	for _, tk := range tasks {
		if tk.Name == "hello-file" {
			if oracle, err = tk.Oracle.ActionStrings(); err != nil {
				t.Fatal(err)
			}
		}
	}
	type stepReply struct {
		Reward     float64 `json:"reward"`
		Terminated bool    `json:"terminated"`
		Done       bool    `json:"done"`
		Info       struct {
			RewardComponents map[string]float64 `json:"reward_components"`
		} `json:"info"`
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	native := func(actions []string) (last stepReply) {
		nativeEpisode(t, srv.URL, "hello-file", append(actions, "[]"), &last)
		return last
	}
	openEnv := func(actions []string) (last stepReply) {
		openEnvEpisode(t, srv.URL, "hello-file", append(actions, "[]"), &last)
		return last
	}
	if r := native(oracle); !r.Terminated || r.Reward != 1 || r.Info.RewardComponents["task_check"] != 1 {
		t.Errorf("native oracle episode: %+v", r)
	}
	if r := native(nil); !r.Terminated || r.Reward != 0 || r.Info.RewardComponents["task_check"] != 0 || r.Info.RewardComponents == nil {
		t.Errorf("native unsolved episode: %+v", r)
	}
	if r := openEnv(oracle); !r.Done || r.Reward != 1 || !strings.Contains(string(r.Metadata["reward_components"]), `"task_check":1`) {
		t.Errorf("OpenEnv oracle episode: %+v", r)
	}
	if r := openEnv([]string{`[{"keystrokes": "echo wrong > greeting.txt\n", "duration": 0.5}]`}); !r.Done || r.Reward != 0 {
		t.Errorf("OpenEnv wrong episode: %+v", r)
	}
}

// nativeEpisode creates a session of world on the native API and steps it
// through actions, decoding the last step's reply (alone) into last.
func nativeEpisode(t *testing.T, base, world string, actions []string, last any) {
	t.Helper()
	var created struct {
		SessionID string `json:"session_id"`
	}
	if code := postJSON(t, base+"/v1/sessions", map[string]any{"world_id": world}, &created); code/100 != 2 {
		t.Fatalf("create: %d", code)
	}
	var raw json.RawMessage
	for _, a := range actions {
		if code := postJSON(t, base+"/v1/sessions/"+created.SessionID+"/step", map[string]any{"action": json.RawMessage(a)}, &raw); code/100 != 2 {
			t.Fatalf("step %s: %d", a, code)
		}
	}
	if err := json.Unmarshal(raw, last); err != nil {
		t.Fatal(err)
	}
}

// openEnvEpisode does the same over OpenEnv's /reset and /step.
func openEnvEpisode(t *testing.T, base, world string, actions []string, last any) {
	t.Helper()
	var reset struct {
		Observation struct {
			SessionID string `json:"session_id"`
		} `json:"observation"`
	}
	if code := postJSON(t, base+"/reset", map[string]any{"world_id": world}, &reset); code/100 != 2 {
		t.Fatalf("reset: %d", code)
	}
	var raw json.RawMessage
	for _, a := range actions {
		if code := postJSON(t, base+"/step", map[string]any{"action": json.RawMessage(a), "session_id": reset.Observation.SessionID}, &raw); code/100 != 2 {
			t.Fatalf("openenv step %s: %d", a, code)
		}
	}
	if err := json.Unmarshal(raw, last); err != nil {
		t.Fatal(err)
	}
}

// TestServeRealMCPWorldByName: `serve --real-mcp memory=CMD` gives sessions
// a world named memory (its tools listed from the server at startup), on
// backend real:mcp, as the README's example uses it.
func TestServeRealMCPWorldByName(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		testkit.Missing(t, "node", err, ".ci/setup.d/40-mcp-npm.sh installs it")
	}
	server, _ := filepath.Abs("../../tools/npm/node_modules/@modelcontextprotocol/server-memory/dist/index.js")
	if _, err := os.Stat(server); err != nil {
		t.Fatalf("memory server not installed (%v): run `bash .ci/setup.d/40-mcp-npm.sh`", err)
	}
	t.Setenv("MEMORY_FILE_PATH", filepath.Join(t.TempDir(), "memory.jsonl"))
	_, srv := startTestServe(t, func(f *simFlags) { f.real.mcp = []string{"memory=node " + server} })
	var created struct {
		SessionID string `json:"session_id"`
		Info      struct{ Backend string }
	}
	if code := postJSON(t, srv.URL+"/v1/sessions", map[string]any{"world_id": "memory"}, &created); code != http.StatusCreated || created.Info.Backend != realenv.BackendMCP {
		t.Fatalf("create world memory: %d %+v", code, created)
	}
	var step struct{ Observation string }
	if code := postJSON(t, srv.URL+"/v1/sessions/"+created.SessionID+"/step", map[string]any{"action": `{"name":"read_graph","arguments":{}}`}, &step); code != http.StatusOK || !strings.Contains(step.Observation, "entities") {
		t.Fatalf("real read_graph: %d %+v", code, step)
	}
}
