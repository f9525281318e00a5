package server

import (
	"bufio"
	"bytes"
	"context"
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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/world"
)

// trainerFixture is one file of testdata/trainers: the messages one RL
// trainer's environment client sends the server, in order, with what it
// reads from each reply. Source names the upstream files and commit the
// interface was read from.
type trainerFixture struct {
	Source []string `json:"source"`
	// Adapter is the file under examples/trainers that sends Exchanges;
	// empty when the trainer's own client does (verifiers).
	Adapter string `json:"adapter"`
	// Driver is the Python file beside the fixture that runs Adapter as
	// the trainer does (a stand-in of the trainer's base class with
	// upstream's signatures) and prints what the trainer got.
	Driver string `json:"driver"`
	Parses string `json:"parses"`
	// Base is the path the client's base URL ends in ("" for the root).
	Base      string            `json:"base"`
	Exchanges []openEnvExchange `json:"exchanges"`
	// Result is checked against the driver's output like a reply.
	Result *openEnvExchange `json:"result"`
}

// trainerReward gives the trainer fixtures' worlds (the server tests'
// terminal world as "shell", and the MCP world "tools") a success rule
// that fires on the fake world model's observations, so the episode
// rewards every trainer here sums are not all zero.
const trainerReward = "reward:\n  success: {final_observation: 'obs \\d+ for'}\n"

// trainerToolsExtra gives the fixtures' MCP world's tool two optional
// parameters whose schemas hold an enum and bounds, the keywords a
// schema generated from a Python signature loses (TRL).
const trainerToolsExtra = "        tone: {type: string, description: How to say it., enum: [plain, loud]}\n" +
	"        times: {type: integer, description: How many times., minimum: 1, maximum: 3}\n"

// trainerWorlds are the fixtures' worlds by name, as YAML.
func trainerWorlds() map[string]string {
	return map[string]string{
		"shell": strings.Replace(termSpec, "name: term", "name: shell", 1) + trainerReward,
		"tools": strings.Replace(mcpToolsSpec, "        message: {type: string}\n",
			"        message: {type: string}\n"+trainerToolsExtra, 1) + trainerReward,
	}
}

func trainerHarness(t *testing.T, opts *Options) *harness {
	h := newHarness(t, "", opts)
	for _, y := range trainerWorlds() {
		spec, err := world.Parse([]byte(y), "trainer.yaml")
		if err != nil {
			t.Fatal(err)
		}
		h.m.AddWorld(spec)
	}
	return h
}

func loadTrainerFixtures(t *testing.T) map[string]trainerFixture {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "trainers", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no trainer fixtures: %v", err)
	}
	out := map[string]trainerFixture{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f trainerFixture
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(f.Source) == 0 || len(f.Exchanges) == 0 || (f.Adapter != "" && (f.Driver == "" || f.Result == nil)) {
			t.Fatalf("%s: a fixture names its source and has exchanges; an adapter's has a driver and a result", p)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".json")] = f
	}
	return out
}

// replayTrainer sends a fixture's exchanges in order, HTTP ones as
// requests and WebSocket ones (Send) on one connection, checking each
// reply; $SESSION stands for the last captured session id.
func replayTrainer(t *testing.T, base string, xs []openEnvExchange) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		session string
		conn    *websocket.Conn
	)
	defer func() {
		if conn != nil {
			conn.CloseNow()
		}
	}()
	client := &http.Client{Timeout: time.Minute}
	for i, x := range xs {
		var raw []byte
		if x.Send != "" {
			if conn == nil {
				c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
				if err != nil {
					t.Fatal(err)
				}
				conn = c
			}
			if err := conn.Write(ctx, websocket.MessageText, x.payload(session)); err != nil {
				t.Fatalf("exchange %d (%s): %v", i, x.Note, err)
			}
			_, msg, err := conn.Read(ctx)
			if x.Closes {
				if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
					t.Fatalf("exchange %d (%s): want a normal close, got %q, %v", i, x.Note, msg, err)
				}
				conn = nil
				continue
			}
			if err != nil {
				t.Fatalf("exchange %d (%s): %v", i, x.Note, err)
			}
			raw = msg
		} else {
			var body io.Reader
			if x.Body != nil {
				body = bytes.NewReader(x.payload(session))
			}
			req, _ := http.NewRequest(x.Method, base+strings.ReplaceAll(x.Path, "$SESSION", session), body)
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			want := x.Status
			if want == 0 {
				want = http.StatusOK
			}
			if resp.StatusCode != want {
				t.Fatalf("exchange %d (%s): status %d, want %d: %s", i, x.Note, resp.StatusCode, want, raw)
			}
			if x.Status == http.StatusNoContent {
				continue
			}
		}
		if session != "" {
			x.Want = withSession(x.Want, session)
		}
		got := checkReply(t, i, x, raw)
		if x.Capture != "" {
			v, _ := lookup(got, x.Capture)
			s, ok := v.(string)
			if !ok || s == "" {
				t.Fatalf("exchange %d (%s): no %s to capture: %s", i, x.Note, x.Capture, raw)
			}
			session = s
		}
	}
}

// withSession replaces "$SESSION" among want's values by the session id.
func withSession(want map[string]any, session string) map[string]any {
	out := make(map[string]any, len(want))
	for k, v := range want {
		if v == "$SESSION" {
			v = session
		}
		out[k] = v
	}
	return out
}

// TestTrainerFixtures replays every trainer fixture against a real
// in-process server: each reply has the fields the trainer's client reads.
func TestTrainerFixtures(t *testing.T) {
	for name, f := range loadTrainerFixtures(t) {
		t.Run(name, func(t *testing.T) {
			h := trainerHarness(t, nil)
			replayTrainer(t, h.srv.URL+f.Base, f.Exchanges)
		})
	}
}

var sessionIDs = regexp.MustCompile(`s_[0-9a-f]{24}`)

// recordedCall is one request an adapter sent, session ids as $SESSION.
type recordedCall struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Body   any    `json:"body,omitempty"`
}

// recorder is a reverse proxy in front of the server that records every
// request passing through it.
func recorder(t *testing.T, target string) (string, func() []recordedCall) {
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	var (
		mu    sync.Mutex
		calls []recordedCall
	)
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		c := recordedCall{Method: r.Method, Path: sessionIDs.ReplaceAllString(r.URL.RequestURI(), "$$SESSION")}
		if len(b) > 0 {
			if err := json.Unmarshal(sessionIDs.ReplaceAll(b, []byte("$$SESSION")), &c.Body); err != nil {
				t.Errorf("%s %s: body %q is not JSON", r.Method, r.URL, b)
			}
		}
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)
	return rec.URL, func() []recordedCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]recordedCall(nil), calls...)
	}
}

// TestTrainerAdapters runs each adapter of examples/trainers under its
// driver (the trainer's calls, against a stand-in of the trainer's base
// class with upstream's signatures) against a real `agentworld serve`
// process (the fixtures' worlds, a fake world model) behind a recording
// proxy: the requests it sends are exactly its fixture's, and the trainer
// gets the fixture's result (a GRPO group's shared start, summed rewards,
// ended episodes).
func TestTrainerAdapters(t *testing.T) {
	py := testkit.LookPath(t, "python3", "install python3 (.ci/setup.d/30-python.sh)")
	gobin := testkit.LookPath(t, "go", "install Go")
	bin := buildAgentworld(t, gobin)
	worlds := t.TempDir()
	for name, y := range trainerWorlds() {
		if err := os.WriteFile(filepath.Join(worlds, name+".yaml"), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, f := range loadTrainerFixtures(t) {
		if f.Adapter == "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			model := newFakeModel(t)
			proxyURL, calls := recorder(t, startServe(t, bin, "--no-db", "--addr", "127.0.0.1:0", "--worlds", worlds,
				"--model", model.URL(), "--model-name", "wm"))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "trainers", f.Driver),
				filepath.Join("..", "..", filepath.Dir(f.Adapter)), proxyURL+f.Base)
			cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("driver: %v\n%s%s", err, out, stderr.Bytes())
			}
			t.Logf("driver output: %s", out)
			var want []recordedCall
			for _, x := range f.Exchanges {
				c := recordedCall{Method: x.Method, Path: x.Path}
				if x.Body != nil {
					if err := json.Unmarshal(x.Body, &c.Body); err != nil {
						t.Fatal(err)
					}
				}
				want = append(want, c)
			}
			if d := cmp.Diff(want, calls()); d != "" {
				got, _ := json.MarshalIndent(calls(), "", "  ")
				t.Errorf("%s sent other requests than %s.json (-fixture +sent):\n%s\nsent: %s", f.Adapter, name, d, got)
			}
			checkReply(t, -1, *f.Result, out)
		})
	}
}

// buildAgentworld builds the agentworld binary (with the test's -race
// flag, so its packages come from the build cache this test was built
// from).
func buildAgentworld(t *testing.T, gobin string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentworld")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, gobin, append(args, "../../cmd/agentworld")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// servingOn is the line `agentworld serve` prints once it listens.
var servingOn = regexp.MustCompile(`serving on (http://\S+)`)

// startServe starts `agentworld serve` with args and returns its base
// URL; the process is killed when the test ends.
func startServe(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found, read := make(chan string, 1), make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-read // stderr ends with the process; then Wait may close it
		_ = cmd.Wait()
	})
	go func() { // reads stderr to the end, so the server never blocks on it
		defer close(read)
		var log bytes.Buffer
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := servingOn.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
			log.WriteString(sc.Text() + "\n")
		}
		close(found)
		t.Logf("serve's log:\n%s", log.Bytes())
	}()
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatal("serve exited before listening")
		}
		return u
	case <-time.After(time.Minute):
		t.Fatal("serve did not listen within a minute")
	}
	return ""
}

// TestOpenEnvWorldSchema: GET /schema describes the world a bare reset
// gets when there is one to describe (a world's mount, an explicit
// default world, a single loaded world), an unknown mount is a 404, and a
// list_tools before any reset names what it cannot list.
func TestOpenEnvWorldSchema(t *testing.T) {
	h := trainerHarness(t, nil)
	title := func(base, path string) (int, any) {
		var sc map[string]any
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&sc)
		v, _ := lookup(sc, "action.title")
		return resp.StatusCode, v
	}
	tools := trainerHarness(t, &Options{DefaultWorld: "tools"})
	for _, c := range []struct {
		base, path string
		status     int
		title      any
	}{
		{h.srv.URL, "/schema", 200, "AgentWorldAction"}, // three worlds, none chosen
		{h.srv.URL, "/openenv/tools/schema", 200, "CallToolAction"},
		{h.srv.URL, "/openenv/shell/schema", 200, "AgentWorldAction"},
		{h.srv.URL, "/openenv/nope/schema", 404, nil},
		{tools.srv.URL, "/schema", 200, "CallToolAction"},
	} {
		if st, got := title(c.base, c.path); st != c.status || got != c.title {
			t.Errorf("%s: %d %v, want %d %v", c.path, st, got, c.status, c.title)
		}
	}
	replayTrainer(t, h.srv.URL+"/openenv/shell", []openEnvExchange{{
		Note: "list_tools before a reset, in a world without tools", Send: `{"type": "step", "data": {"type": "list_tools"}}`,
		Want: map[string]any{"type": "error", "data.code": "VALIDATION_ERROR", "data.field": "action.type"},
	}})
}
