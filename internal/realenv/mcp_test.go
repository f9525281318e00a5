package realenv

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// repoRoot finds the module root from the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// memoryServer returns the argv of the pinned npm memory MCP server from
// tools/npm (AGENTWORLD_NPM_TOOLS overrides the directory), skipping when it
// is not installed and saying how to install it.
func memoryServer(t *testing.T) []string {
	t.Helper()
	dir := os.Getenv("AGENTWORLD_NPM_TOOLS")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "tools", "npm")
	}
	script := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		testkit.Missing(t, "the npm MCP memory server", err, "run `npm ci --prefix tools/npm` (.ci/setup.d does)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		testkit.Missing(t, "node", err, ".ci/setup.d/40-mcp-npm.sh installs it")
	}
	return []string{"node", script}
}

func startMemory(t *testing.T, rec *RecordOptions) (*MCPEnv, *Recorded) {
	t.Helper()
	env, err := NewMCP(&MCPOptions{
		Command:     memoryServer(t),
		Env:         []string{"MEMORY_FILE_PATH=" + filepath.Join(t.TempDir(), "memory.jsonl")},
		CallTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorded(env, rec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := r.Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !strings.Contains(first, "create_entities") {
		t.Fatalf("first observation lacks the tool list: %q", first)
	}
	return env, r
}

func mstep(t *testing.T, r *Recorded, action string) StepResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := r.Step(ctx, action)
	if err != nil {
		t.Fatalf("Step(%s): %v", action, err)
	}
	return res
}

func TestMCPRecordExportAndCrash(t *testing.T) {
	testkit.NoLeaks(t)
	recDir, outDir := t.TempDir(), t.TempDir()
	env, r := startMemory(t, &RecordOptions{ID: "mem-1", Dir: recDir, Task: "memory-demo"})
	tools := env.Tools()
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"create_entities", "read_graph", "search_nodes"} {
		if !strings.Contains(strings.Join(names, ","), want) {
			t.Fatalf("tools %v lack %s", names, want)
		}
	}

	res := mstep(t, r, `{"name":"create_entities","arguments":{"entities":[{"name":"Ada","entityType":"person","observations":["wrote the first program"]}]}}`)
	if res.Broken || !strings.Contains(res.Observation, `"Ada"`) || strings.Contains(res.Observation, `"isError":true`) {
		t.Fatalf("create_entities: %+v", res)
	}
	res = mstep(t, r, `{"type":"function","function":{"name":"search_nodes","arguments":"{\"query\":\"program\"}"}}`)
	if !strings.Contains(res.Observation, "wrote the first program") {
		t.Fatalf("search_nodes: %s", res.Observation)
	}
	// A tool the server does not have is the server's own error, not a
	// broken session.
	res = mstep(t, r, `{"name":"no_such_tool","arguments":{}}`)
	if res.Broken || !strings.Contains(strings.ToLower(res.Observation), "no_such_tool") {
		t.Fatalf("unknown tool: %+v", res)
	}
	if _, err := r.Step(context.Background(), `not json`); !errors.Is(err, conversation.ErrBadAction) {
		t.Fatalf("malformed action: err = %v", err)
	}

	// Crash the server: the step answers with an error observation, the
	// session is broken, the recording stays.
	if err := syscall.Kill(env.session.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	res = mstep(t, r, `{"name":"read_graph","arguments":{}}`)
	if !res.Broken || !strings.Contains(res.Observation, `"error"`) || res.Error == "" {
		t.Fatalf("after crash: %+v", res)
	}
	if _, err := r.Step(context.Background(), `{"name":"read_graph"}`); !errors.Is(err, ErrBroken) {
		t.Fatalf("step on a broken session: err = %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	trajs, err := ReadTrajectories(recDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(trajs) != 1 {
		t.Fatalf("%d recordings, want 1", len(trajs))
	}
	tr := trajs[0]
	if err := tr.Validate(); err != nil {
		t.Fatalf("recorded trajectory invalid: %v", err)
	}
	if tr.Domain != "mcp" || tr.Source != "real:mcp" || len(tr.Turns) != 4 {
		t.Fatalf("recording: domain %s source %s turns %d", tr.Domain, tr.Source, len(tr.Turns))
	}
	var status string
	json.Unmarshal(tr.Meta["status"], &status)
	if status != "broken" || string(tr.Turns[3].Meta["broken"]) != "true" {
		t.Fatalf("recording not marked broken: status %q, last turn meta %s", status, tr.Turns[3].Meta)
	}
	var space []map[string]any
	if err := json.Unmarshal([]byte(tr.Components.ActionSpace), &space); err != nil || len(space) != len(tools) {
		t.Fatalf("action space is not the server's %d tool definitions: %v\n%s", len(tools), err, tr.Components.ActionSpace)
	}
	if _, ok := space[0]["inputSchema"]; !ok {
		t.Fatalf("tool definition lacks inputSchema: %v", space[0])
	}

	stats, err := ExportRecords(trajs, outDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(outDir, "mcp_test.jsonl")
	if stats.Files[file] != 4 {
		t.Fatalf("export stats %+v", stats)
	}
	files, err := trajectory.DataFiles(outDir)
	if err != nil || len(files) != 1 {
		t.Fatalf("DataFiles: %v %v", files, err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rr := trajectory.NewRecordReader(f, file)
	for i := 1; ; i++ {
		rec, _, err := rr.Next()
		if err != nil {
			if i != 5 {
				t.Fatalf("record %d: %v", i, err)
			}
			break
		}
		if err := rec.Validate(); err != nil {
			t.Fatalf("record %d invalid: %v", i, err)
		}
		if rec.Domain() != "mcp" || rec.TurnIdx != i || rec.TotalTurns != 4 || rec.ID.String() != "1" {
			t.Fatalf("record %d: task %s turn %d/%d id %s", i, rec.Task, rec.TurnIdx, rec.TotalTurns, rec.ID)
		}
		if !strings.HasPrefix(rec.CurrentPrompt, "### Turn "+itoa(i)+"\n**Action:**\n") || !strings.HasPrefix(rec.GroundTruth(), "**Environment Observation:**") {
			t.Fatalf("record %d prompt %q truth %q", i, rec.CurrentPrompt, rec.GroundTruth())
		}
		if !strings.Contains(rec.SystemStr, "create_entities") {
			t.Fatalf("record %d system_str lacks the tool definitions", i)
		}
		if diff := cmp.Diff(tr.Turns[i-1].Observation, strings.TrimPrefix(rec.GroundTruth(), "**Environment Observation:**\n")); diff != "" {
			t.Fatalf("record %d ground truth differs from the recording: %s", i, diff)
		}
	}
	benchExported(t, outDir)
}

// benchExported runs the AgentWorldBench pipeline over exported records:
// a fake world model that echoes the real observation for even turns and
// invents one for odd turns, judged by the offline rules scorer.
func benchExported(t *testing.T, data string) {
	t.Helper()
	fake := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		last := r.Messages[len(r.Messages)-1].Content
		if strings.HasPrefix(last, "### Turn 2") || strings.HasPrefix(last, "### Turn 4") {
			return fakellm.Reply{Content: "<predicted_observation>{\"content\":[]}</predicted_observation>"}
		}
		return fakellm.Reply{Content: "<think>easy</think><predicted_observation>made up</predicted_observation>"}
	})
	defer fake.Close()
	out := t.TempDir()
	sum, err := bench.Run(context.Background(), &bench.Options{
		Data: data, Out: out,
		Model: worldmodel.New(fake.URL, "fake", nil), ModelName: "fake",
		Rules: judge.RuleScorer{}, JudgeName: bench.RulesJudgeName,
	})
	if err != nil {
		t.Fatalf("bench over exported records: %v", err)
	}
	if sum.Total != 4 || sum.Done != 4 || len(sum.Failed) != 0 {
		t.Fatalf("bench summary %+v", sum)
	}
	rows, err := bench.ReadJudged(sum.JudgedPath)
	if err != nil || len(rows) != 4 {
		t.Fatalf("judged rows: %d, %v", len(rows), err)
	}
	rep := bench.Score(rows, nil)
	if rep == nil {
		t.Fatal("no score report")
	}
	for _, r := range rows {
		if !r.Valid() || r.Domain != "mcp" {
			t.Fatalf("judged row %+v", r)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
