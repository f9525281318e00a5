package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit"
)

// skyrlDriver plays SkyRL's part: two environments of one prompt (same
// group_key), each init, two steps (an action, then the end action) and
// close, as SkyRL's generator calls them.
const skyrlDriver = `
import json, sys
sys.path.insert(0, sys.argv[1])
from skyrl_env import AgentWorldEnv
out = []
for i in range(2):
    env = AgentWorldEnv({"base_url": sys.argv[2]}, {"extra_info": {"world_id": "term", "group_key": "task-1", "max_turns": 5}})
    prompt, meta = env.init([{"role": "user", "content": "Fix the failing test."}])
    steps = [env.step('[{"keystrokes": "ls\\n", "duration": 0.1}]'), env.step("[]")]
    env.close()
    out.append({"prompt": prompt, "steps": [{"observations": s["observations"], "reward": s["reward"], "done": s["done"]} for s in steps]})
print(json.dumps(out))
`

var sessionIDs = regexp.MustCompile(`s_[0-9a-f]{24}`)

// TestSkyRLAdapterConformance runs examples/trainers/skyrl_env.py against
// the server as SkyRL's generator drives a BaseTextEnv and pins every
// request it sends (session ids masked) in testdata/trainers/skyrl.json
// (-update rewrites it); the two environments of one group share their
// first observation, and the end action ends the episode.
func TestSkyRLAdapterConformance(t *testing.T) {
	py := testkit.LookPath(t, "python3", "install python3")
	h := newHarness(t, "", nil)
	target, _ := url.Parse(h.srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	type call struct {
		Method string          `json:"method"`
		Path   string          `json:"path"`
		Body   json.RawMessage `json:"body,omitempty"`
	}
	var (
		mu    sync.Mutex
		calls []call
	)
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		c := call{Method: r.Method, Path: sessionIDs.ReplaceAllString(r.URL.Path, "<session>")}
		if len(b) > 0 {
			c.Body = json.RawMessage(sessionIDs.ReplaceAll(b, []byte("<session>")))
		}
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	defer rec.Close()
	script := filepath.Join(t.TempDir(), "driver.py")
	if err := os.WriteFile(script, []byte(skyrlDriver), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, script, filepath.Join("..", "..", "examples", "trainers"), rec.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("driver: %v\n%s", err, out)
	}
	var got []struct {
		Prompt []map[string]string `json:"prompt"`
		Steps  []struct {
			Observations []map[string]string `json:"observations"`
			Reward       float64             `json:"reward"`
			Done         bool                `json:"done"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("driver output %q: %v", out, err)
	}
	for i, g := range got {
		if len(g.Prompt) != 2 || g.Prompt[1]["content"] != got[0].Prompt[1]["content"] || g.Prompt[1]["content"] == "" {
			t.Errorf("env %d prompt %v", i, g.Prompt)
		}
		if len(g.Steps) != 2 || g.Steps[0].Done || len(g.Steps[0].Observations) != 1 || !g.Steps[1].Done || len(g.Steps[1].Observations) != 0 {
			t.Errorf("env %d steps %+v", i, g.Steps)
		}
	}
	var pinned bytes.Buffer
	enc := json.NewEncoder(&pinned)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{
		"source": "examples/trainers/skyrl_env.py driven as NovaSky-AI/SkyRL's skyrl_gym BaseTextEnv (init, step, close)",
		"calls":  calls,
	}); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, filepath.Join("testdata", "trainers", "skyrl.json"), pinned.Bytes())
}
