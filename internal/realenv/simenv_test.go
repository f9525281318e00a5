package realenv

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

func newManager(t *testing.T, o *BackendOptions) *sim.Manager {
	t.Helper()
	m := sim.New(&sim.Options{Backends: Backends(o)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Close(ctx)
	})
	return m
}

func simStep(t *testing.T, m *sim.Manager, id, action string) *sim.StepResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, _ := json.Marshal(action)
	res, err := m.Step(ctx, id, sim.StepRequest{Action: raw})
	if err != nil {
		t.Fatalf("step %s: %v", action, err)
	}
	return res
}

// TestShadowSessionRecordsDivergence runs a simulator session shadowed by
// the real terminal against a fake world model: the agent gets the real
// screens, every stepped turn records the simulator's answer and its
// divergence, and the simulator is teacher-forced on the real history.
func TestShadowSessionRecordsDivergence(t *testing.T) {
	requireSandbox(t)
	testkit.NoLeaks(t)
	task, err := LoadTask(filepath.Join(repoRoot(t), "examples", "tasks", "hello-file"))
	if err != nil {
		t.Fatal(err)
	}
	const wrote = "root@sandbox:/app# echo 'hello agentworld' > greeting.txt\nroot@sandbox:/app#"
	fake := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		last := r.Messages[len(r.Messages)-1].Content
		switch {
		case strings.Contains(last, "> greeting.txt"):
			return fakellm.Reply{Content: "<think>simple</think><predicted_observation>" + wrote + "</predicted_observation>"}
		case strings.Contains(last, "cat greeting.txt"):
			return fakellm.Reply{Content: "<predicted_observation>" + wrote + "\nroot@sandbox:/app# cat greeting.txt\nhello world\nroot@sandbox:/app#</predicted_observation>"}
		}
		return fakellm.Reply{Content: "<predicted_observation>bash: ls: command not found\nroot@sandbox:/app#</predicted_observation>"}
	})
	defer fake.Close()
	simulator := sim.NewModelBackend(worldmodel.New(fake.URL, "fake-lwm", nil), &sim.ModelOptions{MaxTokens: 512})
	m := newManager(t, &BackendOptions{Tasks: map[string]*Task{task.Name: task}, Simulator: simulator, Terminal: &TerminalOptions{TempDir: t.TempDir()}})

	ctx := context.Background()
	reply, err := m.Create(ctx, sim.CreateRequest{World: TaskWorld(task), Backend: sim.BackendModel, Params: map[string]json.RawMessage{"shadow": json.RawMessage(`"real"`)}})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Observation != "root@sandbox:/app#" {
		t.Fatalf("first observation %q is not the real screen", reply.Observation)
	}
	actions := []string{
		`[{"keystrokes":"echo 'hello agentworld' > greeting.txt\n","duration":1}]`,
		`[{"keystrokes":"cat greeting.txt\n","duration":1}]`,
		`[{"keystrokes":"ls\n","duration":1}]`,
	}
	wantExact := []bool{true, false, false}
	for i, a := range actions {
		res := simStep(t, m, reply.SessionID, a)
		if !strings.HasPrefix(res.Observation, wrote) {
			t.Fatalf("step %d: the agent did not get the real screen:\n%s", i+1, res.Observation)
		}
		var sh Shadow
		if err := json.Unmarshal(res.Info.Extra["shadow"], &sh); err != nil {
			t.Fatalf("step %d: no shadow record: %v (%s)", i+1, err, res.Info.Extra["shadow"])
		}
		if sh.Divergence.Turn != i+1 || sh.Divergence.Exact != wantExact[i] || sh.Divergence.RuleScores == nil || sh.Observation == "" || sh.Backend != sim.BackendModel {
			t.Fatalf("step %d shadow %+v", i+1, sh)
		}
		if !wantExact[i] && sh.Divergence.Similarity >= 1 {
			t.Fatalf("step %d similarity %v for a wrong prediction", i+1, sh.Divergence.Similarity)
		}
	}
	if res := simStep(t, m, reply.SessionID, `[]`); !res.Terminated {
		t.Fatalf("[] did not end the session: %+v", res)
	}
	tr, err := m.Trajectory(ctx, reply.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Turns) != 4 {
		t.Fatalf("%d turns recorded", len(tr.Turns))
	}
	for i := range actions {
		var info sim.StepInfo
		if err := json.Unmarshal(tr.Turns[i].Meta["info"], &info); err != nil || len(info.Extra["shadow"]) == 0 {
			t.Fatalf("turn %d: recorded info lacks the divergence: %v %s", i+1, err, tr.Turns[i].Meta["info"])
		}
	}
	// Teacher forcing: the simulator's third request carries the real
	// screens of turns 1 and 2 as the assistant messages.
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("the fake world model got %d requests, want 3", len(reqs))
	}
	var assistants []string
	for _, msg := range reqs[2].Messages {
		if msg.Role == "assistant" {
			assistants = append(assistants, msg.Content)
		}
	}
	if len(assistants) != 2 || !strings.Contains(assistants[1], "hello agentworld\nroot@sandbox:/app#") {
		t.Fatalf("simulator history is not the real one: %q", assistants)
	}
}

// TestRealBackendsThroughSessions serves a real terminal and a real MCP
// server through the session manager.
func TestRealBackendsThroughSessions(t *testing.T) {
	requireSandbox(t)
	t.Parallel() // no leak check: other parallel tests run beside it
	server := memoryServer(t)
	mem := filepath.Join(t.TempDir(), "memory.jsonl")
	m := newManager(t, &BackendOptions{
		Terminal: &TerminalOptions{TempDir: t.TempDir()},
		MCPServers: map[string]MCPServer{
			"memory": {Command: server, Env: []string{"MEMORY_FILE_PATH=" + mem}},
			// Its stdin passes everything up to the first tool call, which
			// it swallows before closing: the server exits without
			// answering, as if it crashed mid-call.
			"dying": {Command: []string{"bash", "-c", `while IFS= read -r l; do case "$l" in *'"tools/call"'*) exit ;; esac; printf '%s\n' "$l"; done | exec "$0" "$1"`, server[0], server[1]}, Env: []string{"MEMORY_FILE_PATH=" + mem}},
		},
	})
	ctx := context.Background()

	term := &world.Spec{Name: "shell", Domain: "terminal", TaskDescription: "a shell", ActionSpace: world.ActionSpace{Description: TerminalActionSpace}, Backend: BackendTerminal}
	r, err := m.Create(ctx, sim.CreateRequest{World: term, Params: map[string]json.RawMessage{"real": json.RawMessage(`{"setup":"echo seeded > s.txt"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	res := simStep(t, m, r.SessionID, `[{"keystrokes":"cat s.txt\n","duration":1}]`)
	if res.Observation != "root@sandbox:/app# cat s.txt\nseeded\nroot@sandbox:/app#" || res.Info.Backend != BackendTerminal {
		t.Fatalf("terminal step: %+v", res)
	}
	// The session's record exports to benchmark records like any other.
	st, err := m.Trajectory(ctx, r.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := trajectory.BenchRecords(st, 7, nil)
	if err != nil || len(recs) != 1 || recs[0].GroundTruth() != "**Environment Observation:**\n"+res.Observation || recs[0].SystemStr != st.SystemPrompt {
		t.Fatalf("export of a session record: %v %+v", err, recs)
	}
	// A fork would have the history but not the real state: it is refused
	// as not resumable when asked for, not on its first step.
	if fork, err := m.Fork(ctx, r.SessionID, sim.ForkRequest{}); !errors.Is(err, sim.ErrNotResumable) || fork != nil {
		t.Fatalf("fork of a real session: %+v, err = %v, want ErrNotResumable", fork, err)
	}
	if _, err := m.Create(ctx, sim.CreateRequest{World: term, Params: map[string]json.RawMessage{"real": json.RawMessage(`{"task":"nope"}`)}}); err == nil || !strings.Contains(err.Error(), "params.real.task") {
		t.Fatalf("unknown task: err = %v", err)
	}

	mcpWorld := &world.Spec{Name: "memory", Domain: "mcp", TaskDescription: "a knowledge graph", ActionSpace: world.ActionSpace{Tools: []world.Tool{{Name: "read_graph"}}}, Backend: BackendMCP}
	r, err = m.Create(ctx, sim.CreateRequest{World: mcpWorld})
	if err != nil {
		t.Fatal(err)
	}
	res = simStep(t, m, r.SessionID, `{"name":"read_graph","arguments":{}}`)
	if !strings.Contains(res.Observation, `"content"`) || res.Terminated {
		t.Fatalf("mcp step: %+v", res)
	}
	tr, err := m.Trajectory(ctx, r.SessionID)
	if err != nil || len(tr.Turns) != 1 {
		t.Fatalf("mcp trajectory: %v", err)
	}

	r, err = m.Create(ctx, sim.CreateRequest{World: mcpWorld, Params: map[string]json.RawMessage{"real": json.RawMessage(`{"server":"dying"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	res = simStep(t, m, r.SessionID, `{"name":"read_graph","arguments":{}}`)
	if !res.Terminated || res.Info.Error == "" || !strings.Contains(res.Observation, `"error"`) || string(res.Info.Extra["broken"]) != "true" {
		t.Fatalf("step on a dead server: %+v", res)
	}
	tr, err = m.Trajectory(ctx, r.SessionID)
	if err != nil || len(tr.Turns) != 1 || string(tr.Meta["status"]) != `"broken"` {
		t.Fatalf("broken session's record: %v, status %s", err, tr.Meta["status"])
	}
}
