package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/trajectory"
)

var recordCmp = []cmp.Option{
	cmpopts.IgnoreUnexported(trajectory.Record{}),
	cmp.Comparer(func(a, b trajectory.ID) bool {
		x, _ := a.MarshalJSON()
		y, _ := b.MarshalJSON()
		return bytes.Equal(x, y)
	}),
	cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }),
}

func readRecords(t *testing.T, r []byte) []*trajectory.Record {
	t.Helper()
	rr := trajectory.NewRecordReader(bytes.NewReader(r), "mem")
	var out []*trajectory.Record
	for {
		rec, _, err := rr.Next()
		if err != nil {
			break
		}
		out = append(out, rec)
	}
	return out
}

// TestBenchRoundTrip: records → trajectories → records gives back every
// original row byte for byte (and so field by field), on the example
// dataset (ids beyond float64, an id shared by two trajectories, U+2028,
// answer suffixes, Python's spacing), on rows with their own system
// prompts, shorter lists and extra fields, and on rows in each layout
// (json.dumps with and without ensure_ascii, compact).
func TestBenchRoundTrip(t *testing.T) {
	testkit.NoLeaks(t)
	files, err := filepath.Glob("../../examples/bench/*_test.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("example dataset missing: %v", err)
	}
	files = append(files, "testdata/bench_quirks.jsonl", "testdata/bench_layouts.jsonl")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			orig, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var trajs bytes.Buffer
			sum, err := ToTrajectories(context.Background(), []string{f}, &trajs, FromBench, nil, &datapipe.Options{Workers: 2, OnError: datapipe.Fatal})
			if err != nil {
				t.Fatal(err)
			}
			tmp := filepath.Join(t.TempDir(), "t.jsonl")
			os.WriteFile(tmp, trajs.Bytes(), 0o644)
			var back bytes.Buffer
			if _, err := ToBench(context.Background(), []string{tmp}, &back, nil, &datapipe.Options{OnError: datapipe.Fatal}); err != nil {
				t.Fatal(err)
			}
			want, got := readRecords(t, orig), readRecords(t, back.Bytes())
			if len(want) == 0 || sum.Records != int64(len(want)) {
				t.Fatalf("read %d records, summary %+v", len(want), sum)
			}
			if d := cmp.Diff(want, got, recordCmp...); d != "" {
				t.Errorf("round trip (-orig +back):\n%s", d)
			}
			if d := cmp.Diff(string(orig), back.String()); d != "" {
				t.Errorf("round trip bytes (-orig +back):\n%s", d)
			}
		})
	}
}

func TestBenchGroupingSplitsReusedIDAndReportsDisagreement(t *testing.T) {
	var out bytes.Buffer
	var warnings []string
	o := &datapipe.Options{Report: func(e *datapipe.RecordError) { warnings = append(warnings, e.Error()) }}
	sum, err := ToTrajectories(context.Background(), []string{"testdata/bench_disagree.jsonl"}, &out, FromBench, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"testdata/bench_disagree.jsonl:2: response[1]: rows of one trajectory disagree: differs from the same turn in the most complete row"}
	if d := cmp.Diff(want, warnings); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var tr trajectory.Trajectory
		if err := json.Unmarshal([]byte(l), &tr); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tr.ID)
	}
	if d := cmp.Diff([]string{"42", "42-2"}, ids); d != "" {
		t.Errorf("ids (-want +got):\n%s", d)
	}
	if sum.SkipReasons["rows-disagree"] != 1 {
		t.Errorf("summary %+v", sum)
	}
	_, err = ToTrajectories(context.Background(), []string{"testdata/bench_disagree.jsonl"}, &out, FromBench, nil, &datapipe.Options{OnError: datapipe.Fatal})
	if err == nil || !strings.Contains(err.Error(), "bench_disagree.jsonl:2: response[1]") {
		t.Fatalf("fatal err = %v", err)
	}
}

// TestTrajectoryToRecordsPlain pins the records of a trajectory that did
// not come from records: the published per-turn format ("### Turn N" /
// "**Action:**" prompts, observations opened by the marker) that bench
// inference and the judges expect, the given integer id, the trajectory's
// own id and source as extra fields, and its own system prompt.
func TestTrajectoryToRecordsPlain(t *testing.T) {
	tr := &trajectory.Trajectory{ID: "run-17", Domain: "terminal", Source: "session", SystemPrompt: "sys",
		Turns: []trajectory.Turn{{Action: "a1", Observation: "o1"}, {Action: "a2", Observation: "o2"}}}
	recs, err := TrajectoryToRecords(tr, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompts := []string{"### Turn 1\n**Action:**\na1", "### Turn 2\n**Action:**\na2"}
	responses := []string{"**Environment Observation:**\no1", "**Environment Observation:**\no2"}
	extra := []trajectory.Field{{Key: "trajectory_id", Value: json.RawMessage(`"run-17"`)}, {Key: "source", Value: json.RawMessage(`"session"`)}}
	want := []*trajectory.Record{
		{Task: "terminal", ID: trajectory.IntID("5"), Prompt: prompts, Response: responses, CurrentPrompt: prompts[0], SystemStr: "sys", TurnIdx: 1, TotalTurns: 2, Extra: extra},
		{Task: "terminal", ID: trajectory.IntID("5"), Prompt: prompts, Response: responses, CurrentPrompt: prompts[1], SystemStr: "sys", TurnIdx: 2, TotalTurns: 2, Extra: extra},
	}
	if d := cmp.Diff(want, recs, recordCmp...); d != "" {
		t.Fatal(d)
	}
	for _, r := range recs {
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestToBenchIDsAndSystemPrompts converts a mixed file: trajectories from
// records get their original rows back, the others are numbered from
// FirstID in input order whatever the worker count; a trajectory with only
// components gets the simulator's world prompt; one of an unknown domain is
// reported by file and line and skipped.
func TestToBenchIDsAndSystemPrompts(t *testing.T) {
	var fromBench bytes.Buffer
	if _, err := ToTrajectories(context.Background(), []string{"../../examples/bench/mcp_test.jsonl"}, &fromBench, FromBench, nil, &datapipe.Options{OnError: datapipe.Fatal}); err != nil {
		t.Fatal(err)
	}
	var benchTrajs []*trajectory.Trajectory
	for _, l := range strings.Split(strings.TrimSpace(fromBench.String()), "\n") {
		tr := new(trajectory.Trajectory)
		if err := json.Unmarshal([]byte(l), tr); err != nil {
			t.Fatal(err)
		}
		benchTrajs = append(benchTrajs, tr)
	}
	if len(benchTrajs) < 2 {
		t.Fatalf("%d trajectories in the mcp examples, want 2 or more", len(benchTrajs))
	}
	comps := &trajectory.Components{TaskDescription: "A notes server.", ActionSpace: `[{"name":"list_notes"}]`,
		Demonstrations: []trajectory.Demonstration{{Action: `{"name":"list_notes","arguments":{}}`, Observation: "[]"}}}
	plain := func(id string, c *trajectory.Components, sys, dom string) *trajectory.Trajectory {
		return &trajectory.Trajectory{ID: id, Domain: dom, Source: "openai-chat", Components: c, SystemPrompt: sys,
			Turns: []trajectory.Turn{{Action: `{"name":"list_notes","arguments":{}}`, Observation: `["a"]`}, {Action: "again", Observation: "[]"}}}
	}
	c1, c2 := plain("c1", comps, "", "mcp"), plain("c2", nil, "own prompt", "MCP")
	input := []*trajectory.Trajectory{c1, benchTrajs[0], c2, plain("c3", nil, "x", "nowhere"), benchTrajs[1]}
	var in bytes.Buffer
	for _, tr := range input {
		if err := writeTrajectory(&in, tr); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "mixed.jsonl")
	if err := os.WriteFile(path, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	var want bytes.Buffer
	for _, x := range []struct {
		tr *trajectory.Trajectory
		id int64
	}{{c1, 40}, {benchTrajs[0], 0}, {c2, 41}, {benchTrajs[1], 0}} {
		recs, layouts, err := trajectoryToRecords(x.tr, x.id, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			b, err := encodeRecord(r, layouts[i])
			if err != nil {
				t.Fatal(err)
			}
			want.Write(append(b, '\n'))
		}
	}
	worldPrompt, err := trajectory.WorldSystemPrompt("mcp", *comps)
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{1, 3} {
		var out bytes.Buffer
		var warnings []string
		o := &datapipe.Options{Workers: workers, Report: func(e *datapipe.RecordError) { warnings = append(warnings, e.Error()) }}
		sum, err := ToBench(context.Background(), []string{path}, &out, &BenchOptions{FirstID: 40}, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(warnings) != 1 || !strings.HasPrefix(warnings[0], path+":4: ") || !strings.Contains(warnings[0], "unknown domain") {
			t.Errorf("workers=%d: warnings %q, want one for line 4", workers, warnings)
		}
		if sum.Skipped != 1 || sum.Written != int64(strings.Count(want.String(), "\n")) {
			t.Errorf("workers=%d: summary %+v", workers, sum)
		}
		if d := cmp.Diff(want.String(), out.String()); d != "" {
			t.Errorf("workers=%d: records (-want +got):\n%s", workers, d)
		}
		recs := readRecords(t, out.Bytes())
		if recs[0].ID.String() != "40" || recs[0].SystemStr != worldPrompt || !strings.Contains(recs[0].SystemStr, "## Example 1\n**Action:**\n") {
			t.Errorf("first record: id %s, system prompt\n%s", recs[0].ID, recs[0].SystemStr)
		}
		if last := recs[len(recs)-1]; last.ID.String() != benchTrajs[1].ID {
			t.Errorf("record from the examples lost its id: %s", last.ID)
		}
	}
}

func TestChatLogToTrajectory(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    *trajectory.Trajectory
		wantErr string
	}{
		{
			name: "two calls, parts content, late user message",
			line: `{"id":"c1","messages":[{"role":"system","content":"You are a helpful agent."},{"role":"user","content":"weather in Paris?"},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
				`{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"{\"temp\":21}"}]},{"role":"user","content":"and Rome?"},` +
				`{"role":"assistant","tool_calls":[{"id":"b","type":"function","function":{"name":"get_weather","arguments":"{\"units\":\"C\",\"city\":\"Rome <x>\"}"}}]},` +
				`{"role":"tool","tool_call_id":"b","content":"sunny"},{"role":"assistant","content":"Done."}],"tools":[{"type":"function","function":{"name":"get_weather"}}]}`,
			want: &trajectory.Trajectory{
				ID: "c1", Domain: "mcp", Source: "openai-chat",
				Components: &trajectory.Components{
					TaskDescription: "You are a helpful agent.\n\nUser request:\nweather in Paris?",
					ActionSpace:     "[\n  {\n    \"type\": \"function\",\n    \"function\": {\n      \"name\": \"get_weather\"\n    }\n  }\n]",
				},
				Turns: []trajectory.Turn{
					{Action: `{"arguments":{"city":"Paris"},"name":"get_weather"}`, Observation: `{"temp":21}`},
					{Action: `{"arguments":{"city":"Rome <x>","units":"C"},"name":"get_weather"}`, Observation: "sunny", Meta: map[string]json.RawMessage{"user_message": json.RawMessage(`"and Rome?"`)}},
				},
			},
		},
		{
			name:    "arguments the simulator refuses",
			line:    `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"not json"}}]},{"role":"tool","tool_call_id":"a","content":"ok"}]}`,
			wantErr: "log.jsonl:3: messages[1].tool_calls[0].function.arguments: invalid record: the simulator accepts a tool call's arguments only as a JSON object: tool f arguments: invalid character 'o' in literal null (expecting 'u')",
		},
		{
			name:    "unanswered call",
			line:    `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}]}`,
			wantErr: "log.jsonl:3: turns[0].observation: turn has an action but no observation",
		},
		{
			name:    "answer to nothing",
			line:    `{"messages":[{"role":"tool","tool_call_id":"zz","content":"x"}]}`,
			wantErr: `log.jsonl:3: messages[0].tool_call_id: invalid record: "zz" answers no earlier tool call`,
		},
		{
			name:    "no tool calls",
			line:    `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`,
			wantErr: "log.jsonl:3: messages: invalid record: no tool calls, so no environment turns",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := ChatLogToTrajectory([]byte(tt.line), "mcp", "log.jsonl", 3)
			if tt.wantErr != "" {
				if len(errs) == 0 || errs[0].Error() != tt.wantErr {
					t.Fatalf("errs = %v, want %s", errs, tt.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatal(errs[0])
			}
			if d := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func FuzzChatLogToTrajectory(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"ok"}]}`))
	f.Add([]byte(`{"messages":[{"role":"function","name":"f","content":"x"}]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		tr, errs := ChatLogToTrajectory(line, "mcp", "f", 1)
		if len(errs) == 0 && len(tr.Check()) > 0 {
			t.Fatalf("accepted an invalid trajectory: %v", tr.Check())
		}
	})
}

// TestSessionRecordings reads pretty-printed recordings (one document per
// file, as sessions are saved) and JSONL alike, and reports a broken
// document at the line where it starts.
func TestSessionRecordings(t *testing.T) {
	dir := t.TempDir()
	tr := trajectory.Trajectory{ID: "s1", Domain: "terminal", Source: "real:terminal", SystemPrompt: "shell",
		Turns: []trajectory.Turn{{Action: "ls", Observation: "a b", Meta: map[string]json.RawMessage{"latency_ms": json.RawMessage("12")}}}}
	pretty, _ := json.MarshalIndent(tr, "", " ")
	p1 := filepath.Join(dir, "s1.json")
	os.WriteFile(p1, append(pretty, '\n'), 0o644)
	tr.ID, tr.Source = "s2", ""
	line, _ := json.Marshal(tr)
	p2 := filepath.Join(dir, "s2.jsonl")
	os.WriteFile(p2, append(append(line, '\n'), "\n{\"id\": \n oops"...), 0o644)
	var out bytes.Buffer
	var reports []string
	sum, err := ToTrajectories(context.Background(), []string{p1, p2}, &out, FromSession, nil,
		&datapipe.Options{Report: func(e *datapipe.RecordError) { reports = append(reports, e.Error()) }})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if sum.Written != 2 || len(lines) != 2 || !strings.Contains(lines[0], `"source":"real:terminal"`) || !strings.Contains(lines[1], `"source":"session"`) {
		t.Fatalf("summary %+v\n%s", sum, out.String())
	}
	if len(reports) != 1 || !strings.HasPrefix(reports[0], p2+":3: bad JSON") {
		t.Fatalf("reports %v", reports)
	}
}

func TestOpenAILogsStream(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "chat.jsonl")
	good := `{"messages":[{"role":"user","content":"list files"},{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"a.txt"}],"tools":[]}`
	os.WriteFile(p, []byte(good+"\n{\"messages\":[]}\n"+good+"\n"), 0o644)
	var out bytes.Buffer
	var reports []string
	sum, err := ToTrajectories(context.Background(), []string{p}, &out, FromOpenAI, &ConvertOptions{Domain: "terminal"},
		&datapipe.Options{Workers: 2, Report: func(e *datapipe.RecordError) { reports = append(reports, e.Error()) }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Written != 2 || len(reports) != 1 || reports[0] != p+":2: messages: invalid record: no messages" {
		t.Fatalf("summary %+v reports %v", sum, reports)
	}
	trajs, err := datapipe.ReadTrajectories(writeTemp(t, out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if trajs[1].ID != "chat.jsonl:3" || trajs[1].Domain != "terminal" || trajs[1].Turns[0].Observation != "a.txt" {
		t.Fatalf("%+v", trajs[1])
	}
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.jsonl")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
