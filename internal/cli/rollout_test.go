package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/realenv"
	"github.com/agentworld/agentworld/internal/rollout"
	"github.com/agentworld/agentworld/internal/server"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// textPolicy acts once in the domain's text format, then ends the
// episode: a keystroke list and [] on the terminal, a JSON tool call and a
// final answer in MCP worlds.
func textPolicy(t *testing.T) *fakellm.Server {
	p := fakellm.New(textPolicyReply)
	t.Cleanup(p.Close)
	return p
}

// textPolicyReply is textPolicy's answer to r.
func textPolicyReply(r *fakellm.Request) fakellm.Reply {
	acted := false
	for _, m := range r.Messages {
		acted = acted || m.Role == "assistant"
	}
	terminal := strings.Contains(r.Messages[0].Content, "terminal action format")
	switch {
	case terminal && !acted:
		return fakellm.Reply{Content: `[{"keystrokes": "python3 --version\n", "duration": 0.5}]`}
	case terminal:
		return fakellm.Reply{Content: `[]`}
	case !acted:
		return fakellm.Reply{Content: `{"name": "list_issues", "arguments": {"project": "WS", "status": "open"}}`}
	}
	return fakellm.Reply{Content: "WS-31 duplicates WS-29."}
}

func readRolloutRows(t *testing.T, dir string) []rollout.Row {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rollout.EpisodesFile))
	if err != nil {
		t.Fatal(err)
	}
	var rows []rollout.Row
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r rollout.Row
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		r.EnvSessionID, r.ForkParent = "", ""
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].GroupID+string(rune('0'+rows[i].SampleIdx)) < rows[j].GroupID+string(rune('0'+rows[j].SampleIdx))
	})
	return rows
}

// TestRolloutExamples runs the README's rollout of the example tasks on the
// embedded replay, reruns it (everything resumed), and runs it again
// against a serve over the native session API: same rows.
func TestRolloutExamples(t *testing.T) {
	pol := textPolicy(t)
	tasks := filepath.Join("..", "..", "examples", "rollout", "tasks.jsonl")
	dir := t.TempDir()
	args := []string{"rollout", "--tasks", tasks, "--policy-url", pol.URL, "--policy-model", "agent", "--group-size", "2", "--out", dir}
	stdout, stderr, err := runBenchCLI(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.HasPrefix(stdout, "4 episodes in 2 groups:") || !strings.Contains(stderr, "rollout: 4/4 episodes (0 resumed, 0 failed)") {
		t.Errorf("stdout %q stderr %q", stdout, stderr)
	}
	rows := readRolloutRows(t, dir)
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		if r.StopReason != rollout.StopTerminated || r.NumTurns != 2 || r.LWMModel == "" {
			t.Errorf("%s/%d: stop %q turns %d lwm %q", r.GroupID, r.SampleIdx, r.StopReason, r.NumTurns, r.LWMModel)
		}
	}
	_, stderr, err = runBenchCLI(t, args...)
	if err != nil || !strings.Contains(stderr, "rollout: 4/4 episodes (4 resumed, 0 failed)") {
		t.Errorf("rerun: %v %q", err, stderr)
	}

	a, err := app.New(context.Background(), app.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	srv := httptest.NewServer(server.New(a.Manager, nil).Handler())
	t.Cleanup(srv.Close)
	remote := t.TempDir()
	args = []string{"rollout", "--tasks", tasks, "--policy-url", pol.URL, "--policy-model", "agent", "--group-size", "2", "--out", remote, "--sim", srv.URL}
	if _, stderr, err := runBenchCLI(t, args...); err != nil {
		t.Fatalf("--sim: %v\n%s", err, stderr)
	}
	got := readRolloutRows(t, remote)
	for i := range got {
		got[i].LWMModel = rows[i].LWMModel // the remote run cannot know the server's flags
	}
	if diff := cmp.Diff(rows, got); diff != "" {
		t.Errorf("--sim rows differ from in-process ones (-in-process +remote):\n%s", diff)
	}
}

func TestRolloutFlagErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tasks := filepath.Join("..", "..", "examples", "rollout", "tasks.jsonl")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rollout", "--out", "x", "--policy-url", "u", "--policy-model", "m"}, "--tasks"},
		{[]string{"rollout", "--tasks", "nope.jsonl", "--out", "x", "--policy-url", "u", "--policy-model", "m"}, "--tasks"},
		{[]string{"rollout", "--tasks", "t", "--out", "x", "--policy-model", "m"}, "--policy-url"},
		// an --out under a file: named as --out, not as some other flag
		{[]string{"rollout", "--tasks", tasks, "--out", filepath.Join(file, "x"), "--policy-url", "baseline:copy", "--policy-model", "m"}, "--out"},
		{[]string{"rollout", "--tasks", tasks, "--out", filepath.Join(file, "x"), "--policy-url", "baseline:copy", "--policy-model", "m",
			"--queue", "nats://127.0.0.1:1"}, "--out"},
	} {
		_, _, err := runBenchCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want it to name %s", c.args, err, c.want)
		}
	}
}

// TestRolloutRealTerminalChecks: terminal tasks served by the real sandbox
// (--real-tasks) get their rewards from the task's check. A real session
// cannot be forked, so each member is its own reset of the task; the agent
// that writes the file passes, the one that writes the wrong text fails.
func TestRolloutRealTerminalChecks(t *testing.T) {
	if err := realenv.ProbeSandbox(); err != nil {
		testkit.Missing(t, "the sandbox real terminal sessions need", err, "install bubblewrap and tmux (.ci/setup.d does)")
	}
	for _, c := range []struct {
		text   string
		reward float64
	}{{"hello agentworld", 1}, {"hello world", 0}} {
		pol := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
			for _, m := range r.Messages {
				if m.Role == "assistant" {
					return fakellm.Reply{Content: "[]"}
				}
			}
			return fakellm.Reply{Content: `[{"keystrokes": "echo '` + c.text + `' > greeting.txt\n", "duration": 0.5}]`}
		})
		t.Cleanup(pol.Close)
		dir := t.TempDir()
		tasks := filepath.Join(dir, "tasks.jsonl")
		if err := os.WriteFile(tasks, []byte(`{"id": "hello", "world": "hello-file", "instruction": "Create greeting.txt."}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out")
		_, stderr, err := runBenchCLI(t, "rollout", "--real-tasks", filepath.Join("..", "..", "examples", "tasks"), "--tasks", tasks,
			"--policy-url", pol.URL, "--policy-model", "agent", "--group-size", "2", "--out", out)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		rows := readRolloutRows(t, out)
		if len(rows) != 2 {
			t.Fatalf("%d rows", len(rows))
		}
		for _, r := range rows {
			if r.Reward != c.reward || r.RewardComponents["task_check"] != c.reward || r.StopReason != rollout.StopTerminated {
				t.Errorf("%q: reward %v components %v stop %q", c.text, r.Reward, r.RewardComponents, r.StopReason)
			}
		}
	}
}

// simHelloWorld is a simulated terminal whose success rule only looks at
// the screen: printing the greeting fools it.
const simHelloWorld = `name: hello-sim
domain: terminal
task_description: A Debian container; the agent works in /app.
action_space:
  description: a JSON list of {keystrokes, duration}; [] ends the task
initial_state: The shell shows the prompt root@sandbox:/app#.
reward:
  success: {final_observation: 'hello agentworld'}
`

// TestRolloutDeceivedRate: episodes simulated on a world whose success
// rule a printed greeting fools are replayed in the real sandbox: the
// agent that writes the file passes both; the one that only prints the
// greeting passes in simulation, fails the real check, and is counted as
// deceived (rate 1/2 overall).
func TestRolloutDeceivedRate(t *testing.T) {
	if err := realenv.ProbeSandbox(); err != nil {
		testkit.Missing(t, "the sandbox real terminal sessions need", err, "install bubblewrap and tmux (.ci/setup.d does)")
	}
	lwm := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Content: "<predicted_observation>root@sandbox:/app# echo 'hello agentworld'\nhello agentworld\nroot@sandbox:/app#</predicted_observation>"}
	})
	t.Cleanup(lwm.Close)
	pol := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		for _, m := range r.Messages {
			if m.Role == "assistant" {
				return fakellm.Reply{Content: "[]"}
			}
		}
		if strings.Contains(r.Messages[1].Content, "honest") {
			return fakellm.Reply{Content: `[{"keystrokes": "echo 'hello agentworld' > greeting.txt\n", "duration": 0.5}]`}
		}
		return fakellm.Reply{Content: `[{"keystrokes": "echo 'hello agentworld'\n", "duration": 0.5}]`}
	})
	t.Cleanup(pol.Close)
	dir := t.TempDir()
	worlds := filepath.Join(dir, "worlds")
	if err := os.MkdirAll(worlds, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(worlds, "hello-sim.yaml"), []byte(simHelloWorld), 0o644); err != nil {
		t.Fatal(err)
	}
	tasks := filepath.Join(dir, "tasks.jsonl")
	if err := os.WriteFile(tasks, []byte(
		`{"id": "honest", "world": "hello-sim", "real_world": "hello-file", "instruction": "honest: create greeting.txt."}`+"\n"+
			`{"id": "fooled", "world": "hello-sim", "real_world": "hello-file", "instruction": "create greeting.txt."}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	_, stderr, err := runBenchCLI(t, "rollout", "--worlds", worlds, "--model", lwm.URL, "--model-name", "fake",
		"--real-tasks", filepath.Join("..", "..", "examples", "tasks"), "--tasks", tasks,
		"--policy-url", pol.URL, "--policy-model", "agent", "--group-size", "1", "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, r := range readRolloutRows(t, out) {
		want := &rollout.RealCheck{World: "hello-file", Reward: 1, RewardComponents: map[string]float64{"task_check": 1}, Passed: true}
		if r.TaskID == "fooled" {
			want = &rollout.RealCheck{World: "hello-file", RewardComponents: map[string]float64{"task_check": 0}, Deceived: true}
		}
		if r.Reward != 1 {
			t.Errorf("%s: simulated reward %v, want 1", r.TaskID, r.Reward)
		}
		if diff := cmp.Diff(want, r.RealCheck); diff != "" {
			t.Errorf("%s real check (-want +got):\n%s", r.TaskID, diff)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, rollout.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var sum rollout.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.RealChecked != 2 || sum.SimPassed != 2 || sum.Deceived != 1 || sum.DeceivedRate != 0.5 {
		t.Errorf("summary: checked %d sim passed %d deceived %d rate %v", sum.RealChecked, sum.SimPassed, sum.Deceived, sum.DeceivedRate)
	}
}

// TestRolloutRemoteReusesConnections: with --sim, each episode in flight
// keeps its connection to the server between steps instead of dialing
// again (the default client keeps two idle connections per host).
func TestRolloutRemoteReusesConnections(t *testing.T) {
	pol := textPolicy(t)
	a, err := app.New(context.Background(), app.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	var conns, requests atomic.Int64
	h := server.New(a.Manager, nil).Handler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	tasks := filepath.Join("..", "..", "examples", "rollout", "tasks.jsonl")
	const concurrency = 8
	_, stderr, err := runBenchCLI(t, "rollout", "--tasks", tasks, "--policy-url", pol.URL, "--policy-model", "agent",
		"--group-size", "8", "--concurrency", fmt.Sprint(concurrency), "--out", t.TempDir(), "--sim", srv.URL)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	// 16 episodes of two steps, their forks, resets and closes: about 70
	// requests over about one connection per episode in flight (and the
	// main loop's); the default client made 28 to 37.
	if n, r := conns.Load(), requests.Load(); n > 2*concurrency || r < 60 {
		t.Errorf("%d connections for %d requests, want at most %d", n, r, 2*concurrency)
	}
}
