package bench_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/filelock"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// testRubric is a minimal judge for pipeline tests: its conversation names
// the sample, its verdict is "SCORES f a c r q".
type testRubric struct{}

var known = map[string]bool{"mcp": true, "search": true, "terminal": true, "swe": true, "android": true, "web": true, "os": true}

func (testRubric) Messages(rec *trajectory.Record, prediction string) ([]worldmodel.Message, bool) {
	d := rec.Domain()
	return []worldmodel.Message{
		{Role: "system", Content: "judge for " + d},
		{Role: "user", Content: "CURRENT " + rec.Prompt[rec.TurnIdx-1] + "\nPREDICTION " + prediction + "\nTRUTH " + rec.GroundTruth()},
	}, !known[d]
}

var scoresRe = regexp.MustCompile(`SCORES (\d) (\d) (\d) (\d) (\d)`)

func (testRubric) Parse(out string) (bench.Verdict, error) {
	m := scoresRe.FindStringSubmatch(out)
	if m == nil {
		return bench.Verdict{}, errors.New("no scores")
	}
	v := make([]int, 5)
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return bench.Verdict{Scores: bench.Scores{Format: v[0], Factuality: v[1], Consistency: v[2], Realism: v[3], Quality: v[4]}, Weaknesses: []string{"w"}}, nil
}

// record builds a record of turns turns evaluated at turn; every text names
// the sample n so the fake server can tell samples apart.
func record(task string, n, turns, turn int) map[string]any {
	var prompts, responses []string
	for i := 1; i <= turns; i++ {
		prompts = append(prompts, fmt.Sprintf("### Turn %d\n**Action:**\nACTION-%d-%d", i, n, i))
		responses = append(responses, fmt.Sprintf("**Environment Observation:**\nOBS-%d-%d", n, i))
	}
	return map[string]any{"task": task, "id": n, "prompt": prompts, "response": responses,
		"current_prompt": fmt.Sprintf("current %d", n), "system_str": "world " + task, "turn_idx": turn, "total_turns": turns}
}

// writeData writes n samples over the seven domains into dir.
func writeData(t testing.TB, dir string, n int) {
	t.Helper()
	domains := []string{"android", "mcp", "os", "search", "swe", "terminal", "web"}
	files := map[string]*os.File{}
	for _, d := range domains {
		f, err := os.Create(filepath.Join(dir, d+"_test.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		files[d] = f
	}
	for i := 0; i < n; i++ {
		d := domains[i%len(domains)]
		b, _ := json.Marshal(record("bench/"+d, i, 3, 1+i%3))
		files[d].Write(append(b, '\n'))
	}
	for _, f := range files {
		f.Close()
	}
}

var sampleRe = regexp.MustCompile(`ACTION-(\d+)-(\d+)`)

// sampleOf finds the sample number a request is about: the last ACTION
// mention of its last message.
func sampleOf(r *fakellm.Request) int {
	last := r.Messages[len(r.Messages)-1].Content
	m := sampleRe.FindAllStringSubmatch(last, -1)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[0][1])
	return n
}

// fakeBackend answers as a model (model "wm") and as a judge (model "judge")
// with deterministic content per sample.
func fakeBackend(delay time.Duration) fakellm.Handler {
	return func(r *fakellm.Request) fakellm.Reply {
		n := sampleOf(r)
		if r.Model == "judge" {
			s := 1 + n%5
			return fakellm.Reply{Delay: delay, Content: fmt.Sprintf("thinking...\nSCORES %d %d %d %d %d", s, 5, s, 4, 3)}
		}
		return fakellm.Reply{Delay: delay, Reasoning: "let me think", Content: fmt.Sprintf("<predicted_observation>OBS-%d-pred</predicted_observation>", n), PromptTokens: 100, CompletionTokens: 10}
	}
}

func options(srv *fakellm.Server, data, out string) *bench.Options {
	cl := &worldmodel.Options{MaxRetryDelay: 5 * time.Millisecond, Timeout: 5 * time.Second}
	return &bench.Options{
		Data: data, Out: out, Concurrency: 8,
		Model: worldmodel.New(srv.URL, "wm", cl), ModelName: "wm", ModelURL: srv.URL,
		JudgeModel: worldmodel.New(srv.URL, "judge", cl), JudgeName: "judge", JudgeURL: srv.URL, Rubric: testRubric{},
		JudgeRetryWait: time.Millisecond,
	}
}

func readJudged(t testing.TB, path string) []bench.Judged {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []bench.Judged
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var j bench.Judged
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, j)
	}
	return out
}

// essence keeps what must not depend on timing or caching.
type essence struct {
	Sample, File, Prediction, Failure string
	Line                              int
	Scores                            *bench.Scores
}

func essentials(rows []bench.Judged) []essence {
	out := make([]essence, len(rows))
	for i, r := range rows {
		out[i] = essence{r.Sample, r.File, r.Prediction.Prediction, r.Failure, r.Line, r.Scores}
	}
	return out
}

func TestInferMessagesMultiTurn(t *testing.T) {
	rec := &trajectory.Record{Task: "x/terminal", ID: trajectory.IntID("1"), SystemStr: "SYS",
		Prompt: []string{"p1", "p2", "p3 with instruction"}, Response: []string{"r1", "r2", "r3"}, CurrentPrompt: "p3", TurnIdx: 3}
	got, err := bench.InferMessages(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := []worldmodel.Message{{Role: "system", Content: "SYS"}, {Role: "user", Content: "p1"}, {Role: "assistant", Content: "r1"}, {Role: "user", Content: "p2"}, {Role: "assistant", Content: "r2"}, {Role: "user", Content: "p3 with instruction"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("messages (-want +got):\n%s", d)
	}
	rec.SystemStr, rec.TurnIdx = "", 1
	got, _ = bench.InferMessages(rec)
	if d := cmp.Diff([]worldmodel.Message{{Role: "user", Content: "p1"}}, got); d != "" {
		t.Fatalf("first turn without system (-want +got):\n%s", d)
	}
	rec.TurnIdx = 4
	if _, err := bench.InferMessages(rec); !errors.Is(err, trajectory.ErrTurnRange) {
		t.Fatalf("turn 4 of 3: err = %v", err)
	}
}

// TestRunSendsExactRequests checks what the model and the judge received for
// a multi-turn record, and the parameters sent by default.
func TestRunSendsExactRequests(t *testing.T) {
	srv := fakellm.New(fakeBackend(0))
	defer srv.Close()
	data, out := t.TempDir(), t.TempDir()
	rec := record("agentbench/terminal", 7, 3, 3)
	b, _ := json.Marshal(rec)
	os.WriteFile(filepath.Join(data, "terminal_test.jsonl"), append(b, '\n'), 0o644)

	sum, err := bench.Run(context.Background(), options(srv, data, out))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 1 || len(sum.Failed) != 0 {
		t.Fatalf("summary %+v", sum)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want model + judge", len(reqs))
	}
	model, judge := reqs[0], reqs[1]
	wantModel := []fakellm.Message{
		{Role: "system", Content: "world agentbench/terminal"},
		{Role: "user", Content: "### Turn 1\n**Action:**\nACTION-7-1"}, {Role: "assistant", Content: "**Environment Observation:**\nOBS-7-1"},
		{Role: "user", Content: "### Turn 2\n**Action:**\nACTION-7-2"}, {Role: "assistant", Content: "**Environment Observation:**\nOBS-7-2"},
		{Role: "user", Content: "### Turn 3\n**Action:**\nACTION-7-3"},
	}
	if d := cmp.Diff(wantModel, model.Messages); d != "" {
		t.Errorf("model messages (-want +got):\n%s", d)
	}
	wantBody := map[string]any{"model": "wm", "max_tokens": float64(32768), "temperature": 0.6}
	gotBody := map[string]any{}
	for k, v := range model.Body {
		if k != "messages" {
			gotBody[k] = v
		}
	}
	if d := cmp.Diff(wantBody, gotBody); d != "" {
		t.Errorf("model parameters (-want +got):\n%s", d)
	}
	wantJudge := []fakellm.Message{
		{Role: "system", Content: "judge for terminal"},
		{Role: "user", Content: "CURRENT ### Turn 3\n**Action:**\nACTION-7-3\nPREDICTION OBS-7-pred\nTRUTH **Environment Observation:**\nOBS-7-3"},
	}
	if d := cmp.Diff(wantJudge, judge.Messages); d != "" {
		t.Errorf("judge messages (-want +got):\n%s", d)
	}
	rows := readJudged(t, filepath.Join(out, bench.JudgedFile))
	if len(rows) != 1 || rows[0].Reasoning != "let me think" || rows[0].FinishReason != "stop" || rows[0].Usage == nil ||
		rows[0].Usage.PromptTokens != 100 || rows[0].Scores == nil || rows[0].Scores.Factuality != 5 || rows[0].Judge != "judge" {
		t.Fatalf("judged row = %+v", rows)
	}
}

// TestRunBadInput runs a data dir holding every kind of bad sample next to
// good ones: each bad one becomes a failed row naming it, counted by
// reason, and the good ones are all scored.
func TestRunBadInput(t *testing.T) {
	var judgeCalls atomic.Int32
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		n := sampleOf(r)
		if r.Model == "judge" {
			judgeCalls.Add(1)
			if n == 4 {
				return fakellm.Reply{Content: "I refuse to give numbers"}
			}
			return fakellm.Reply{Content: "SCORES 3 3 3 3 3"}
		}
		switch n {
		case 1:
			return fakellm.Reply{Content: "", Reasoning: "long...", FinishReason: "length", CompletionTokens: 2048}
		case 2:
			return fakellm.Reply{Content: ""}
		case 3:
			return fakellm.Reply{Content: "<predicted_observation>partial", FinishReason: "length"}
		}
		return fakellm.Reply{Content: fmt.Sprintf("<predicted_observation>OBS-%d</predicted_observation>", n)}
	})
	defer srv.Close()
	data, out := t.TempDir(), t.TempDir()
	lines := []string{}
	add := func(v any) {
		b, _ := json.Marshal(v)
		lines = append(lines, string(b))
	}
	add(record("m/mcp", 0, 2, 2)) // good
	add(record("m/mcp", 1, 2, 2)) // cut by length, nothing left
	add(record("m/mcp", 2, 2, 1)) // empty generation
	add(record("m/mcp", 3, 2, 1)) // cut by length with content: judged, flagged
	add(record("m/mcp", 4, 2, 1)) // the judge never parses
	add(record("m/mcp", 5, 2, 5)) // turn_idx out of range
	short := record("m/mcp", 6, 3, 3)
	short["response"] = []string{"a", "b"} // response shorter than turn_idx
	add(short)
	noTask := record("", 8, 2, 1)
	delete(noTask, "task") // missing field
	add(noTask)
	add(record("m/spreadsheet", 9, 2, 1)) // unknown domain
	bad := strings.Join(lines[:3], "\n") + "\n{not json\n" + strings.Join(lines[3:], "\n") + "\n"
	path := filepath.Join(data, "mcp_test.jsonl")
	os.WriteFile(path, []byte(bad), 0o644)

	// Without --skip-bad the malformed line stops the run, naming file:line,
	// and keeps what finished before it.
	o := options(srv, data, out)
	o.Concurrency = 1
	_, err := bench.Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "mcp_test.jsonl:4") {
		t.Fatalf("err = %v, want one naming mcp_test.jsonl:4", err)
	}
	o = options(srv, data, out)
	o.SkipBad = true
	sum, err := bench.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Source.Skipped != 1 || !strings.Contains(sum.Source.SkippedErrors[0], "mcp_test.jsonl:4") {
		t.Errorf("skipped %d %v, want 1 naming line 4", sum.Source.Skipped, sum.Source.SkippedErrors)
	}
	rows := readJudged(t, filepath.Join(out, bench.JudgedFile))
	if len(rows) != 9 {
		t.Fatalf("%d judged rows, want 9 (one per sample)", len(rows))
	}
	byID := map[string]bench.Judged{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	want := map[string]string{"0": "", "1": bench.FailLength, "2": bench.FailNoGeneration, "3": "", "4": bench.FailJudgeUnparsable,
		"5": bench.FailInvalidRecord, "6": bench.FailInvalidRecord, "8": bench.FailInvalidRecord, "9": ""}
	for id, fail := range want {
		r := byID[id]
		if r.Failure != fail {
			t.Errorf("id %s: failure %q, want %q (%s)", id, r.Failure, fail, r.Error)
		}
		if fail != "" && !strings.Contains(r.Error, r.Sample) && !strings.Contains(r.Error, "mcp_test.jsonl:") {
			t.Errorf("id %s: error %q names neither the sample nor its line", id, r.Error)
		}
	}
	if !byID["3"].Truncated || byID["3"].Prediction.Prediction != "partial" || !byID["1"].Truncated {
		t.Errorf("truncated rows not flagged: %+v / %+v", byID["3"].Prediction, byID["1"].Prediction)
	}
	if !byID["9"].GenericJudge || byID["9"].Domain != "spreadsheet" {
		t.Errorf("unknown domain row = %+v", byID["9"])
	}
	if byID["4"].Attempts != 3 {
		t.Errorf("unparseable judge: %d attempts, want 3", byID["4"].Attempts)
	}
	if byID["8"].Domain != "mcp" {
		t.Errorf("row without task: domain %q, want the file's (mcp)", byID["8"].Domain)
	}
	// Samples 0-2 finished in the first run, which stopped at the malformed
	// line; the second run resumed them, so its counts cover the rest.
	if sum.Resumed != 3 || sum.Truncated != 1 || sum.GenericJudge != 1 {
		t.Errorf("summary resumed %d truncated %d generic %d, want 3, 1, 1", sum.Resumed, sum.Truncated, sum.GenericJudge)
	}
	// The judge saw samples 0, 3 and 9 once and sample 4 three times.
	if n := judgeCalls.Load(); n != 6 {
		t.Errorf("judge calls %d, want 6", n)
	}
}

func TestRunBackendDown(t *testing.T) {
	srv := fakellm.New(func(*fakellm.Request) fakellm.Reply { return fakellm.Reply{} })
	url := srv.URL
	srv.Close()
	data, out := t.TempDir(), t.TempDir()
	writeData(t, data, 4)
	cl := &worldmodel.Options{MaxRetries: 1, MaxRetryDelay: time.Millisecond}
	o := &bench.Options{Data: data, Out: out, Model: worldmodel.New(url, "wm", cl), ModelName: "wm",
		JudgeModel: worldmodel.New(url, "judge", cl), JudgeName: "judge", Rubric: testRubric{}}
	sum, err := bench.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed[bench.FailTransport] != 4 {
		t.Fatalf("failed %v, want 4 transport failures", sum.Failed)
	}
	for _, r := range readJudged(t, filepath.Join(out, bench.JudgedFile)) {
		if r.Failure != bench.FailTransport || !strings.Contains(r.Error, r.Sample) || !strings.Contains(r.Error, "unavailable") {
			t.Errorf("row %s: %q %q", r.Sample, r.Failure, r.Error)
		}
	}

	// Once the backend is back, a rerun computes exactly those samples.
	srv2 := fakellm.New(fakeBackend(0))
	defer srv2.Close()
	sum, err = bench.Run(context.Background(), options(srv2, data, out))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Resumed != 0 || len(sum.Failed) != 0 || srv2.Count() != 8 {
		t.Fatalf("rerun: %+v with %d calls, want 4 samples computed again (8 calls)", sum, srv2.Count())
	}
	if rows := readJudged(t, filepath.Join(out, bench.JudgedFile)); len(rows) != 4 {
		t.Fatalf("%d rows after rerun, want 4 (one per sample)", len(rows))
	}
}

func TestCacheMakesRerunFree(t *testing.T) {
	srv := fakellm.New(fakeBackend(0))
	defer srv.Close()
	data := t.TempDir()
	writeData(t, data, 21)
	out1 := t.TempDir()
	o := options(srv, data, out1)
	cache, err := answercache.OpenCache(filepath.Join(out1, bench.CacheDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Cache = cache
	if _, err := bench.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if srv.Count() != 42 {
		t.Fatalf("first run made %d calls, want 42", srv.Count())
	}
	first := essentials(readJudged(t, filepath.Join(out1, bench.JudgedFile)))

	// A fresh output directory with the same settings and cache: no calls.
	srv.Reset()
	out2 := t.TempDir()
	o = options(srv, data, out2)
	o.Cache, _ = answercache.OpenCache(filepath.Join(out1, bench.CacheDir), nil)
	sum, err := bench.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Count() != 0 || sum.CacheHits != 42 {
		t.Fatalf("cached rerun made %d calls (%d hits), want 0", srv.Count(), sum.CacheHits)
	}
	if d := cmp.Diff(first, essentials(readJudged(t, filepath.Join(out2, bench.JudgedFile)))); d != "" {
		t.Fatalf("cached run differs (-first +cached):\n%s", d)
	}

	// --no-cache: every call is made again.
	srv.Reset()
	o = options(srv, data, t.TempDir())
	if _, err := bench.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if srv.Count() != 42 {
		t.Fatalf("uncached run made %d calls, want 42", srv.Count())
	}
}

func TestCacheSkipsTruncated(t *testing.T) {
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if r.Model == "judge" {
			return fakellm.Reply{Content: "SCORES 2 2 2 2 2"}
		}
		return fakellm.Reply{Content: "<predicted_observation>cut", FinishReason: "length"}
	})
	defer srv.Close()
	data := t.TempDir()
	writeData(t, data, 3)
	dir := t.TempDir()
	for range 2 {
		o := options(srv, data, t.TempDir())
		o.Cache, _ = answercache.OpenCache(dir, nil)
		if _, err := bench.Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	models := 0
	for _, r := range srv.Requests() {
		if r.Model == "wm" {
			models++
		}
	}
	if models != 6 {
		t.Fatalf("model calls %d, want 6: truncated generations must not be cached", models)
	}
}

// TestResumeAfterCancel interrupts a run midway, reruns it, and checks that
// finished samples are not requested again and the final rows equal an
// uninterrupted run's. (The kill -9 version is in internal/cli.)
func TestResumeAfterCancel(t *testing.T) {
	leaks := testkit.Leaks(t)
	var judged atomic.Int32
	var armed atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := fakeBackend(2 * time.Millisecond)
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		rep := base(r)
		if armed.Load() && r.Model == "judge" && judged.Add(1) == 15 {
			cancel()
		}
		return rep
	})
	defer srv.Close()
	data := t.TempDir()
	writeData(t, data, 60)

	ref := t.TempDir()
	if _, err := bench.Run(context.Background(), options(srv, data, ref)); err != nil {
		t.Fatal(err)
	}
	want := essentials(readJudged(t, filepath.Join(ref, bench.JudgedFile)))
	armed.Store(true)
	out := t.TempDir()
	srv.Reset()
	_, err := bench.Run(ctx, options(srv, data, out))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: err = %v, want context.Canceled", err)
	}
	finished := map[int]bool{}
	for _, r := range readJudged(t, filepath.Join(out, bench.JudgedFile)) {
		n, _ := strconv.Atoi(r.ID)
		finished[n] = true
	}
	if len(finished) == 0 || len(finished) == 60 {
		t.Fatalf("%d samples finished before the interruption; the test needs some but not all", len(finished))
	}
	srv.Reset()
	armed.Store(false)
	sum, err := bench.Run(context.Background(), options(srv, data, out))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range srv.Requests() {
		if finished[sampleOf(r)] {
			t.Errorf("finished sample %d requested again (%s)", sampleOf(r), r.Model)
		}
	}
	if sum.Resumed != len(finished) {
		t.Errorf("resumed %d, want %d", sum.Resumed, len(finished))
	}
	if d := cmp.Diff(want, essentials(readJudged(t, filepath.Join(out, bench.JudgedFile)))); d != "" {
		t.Fatalf("resumed run differs from an uninterrupted one (-want +got):\n%s", d)
	}
	srv.Close()
	leaks.Goroutines(2)
}

func TestRunRefusesOtherSettings(t *testing.T) {
	srv := fakellm.New(fakeBackend(0))
	defer srv.Close()
	data, out := t.TempDir(), t.TempDir()
	writeData(t, data, 2)
	if _, err := bench.Run(context.Background(), options(srv, data, out)); err != nil {
		t.Fatal(err)
	}
	o := options(srv, data, out)
	temp := 0.0
	o.Infer.Temperature = &temp
	if _, err := bench.Run(context.Background(), o); !errors.Is(err, bench.ErrSettingsChanged) {
		t.Fatalf("err = %v, want ErrSettingsChanged", err)
	}
}

func TestRunStopsWhenBackendStaysDown(t *testing.T) {
	srv := fakellm.New(func(*fakellm.Request) fakellm.Reply { return fakellm.Reply{Status: 503} })
	defer srv.Close()
	data, out := t.TempDir(), t.TempDir()
	writeData(t, data, 40)
	o := options(srv, data, out)
	o.Concurrency = 2
	o.Model = worldmodel.New(srv.URL, "wm", &worldmodel.Options{MaxRetries: -1})
	o.MaxConsecutiveFailures = 5
	sum, err := bench.Run(context.Background(), o)
	if !errors.Is(err, bench.ErrBackendDown) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("err = %v, want ErrBackendDown naming the status", err)
	}
	if sum.Done >= 40 || sum.Failed[bench.FailTransport] < 5 {
		t.Fatalf("summary %+v: want an early stop after 5 transport failures", sum)
	}
}

// TestRunProgressLines checks the plain (non-terminal) progress display:
// done/total, rate, ETA and failures, ending with a final line.
func TestRunProgressLines(t *testing.T) {
	srv := fakellm.New(fakeBackend(20 * time.Millisecond))
	defer srv.Close()
	data := t.TempDir()
	writeData(t, data, 6)
	var buf strings.Builder
	o := options(srv, data, t.TempDir())
	o.Concurrency = 2
	o.Progress, o.ProgressInterval = &buf, 10*time.Millisecond
	if _, err := bench.Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("progress wrote %d lines, want periodic ones and a final one:\n%s", len(lines), buf.String())
	}
	last := lines[len(lines)-1]
	for _, want := range []string{"bench: 6/6 (100%)", "samples/s", "ETA", "failed 0"} {
		if !strings.Contains(last, want) {
			t.Errorf("final progress line %q lacks %q", last, want)
		}
	}
}

// TestSecondRunOnOneOutIsRefused runs two runs into one directory at once:
// the second is refused at once, naming the directory, and runs once the
// first is done. (The filelock package shows the lock holds across
// processes and is dropped by kill -9.)
func TestSecondRunOnOneOutIsRefused(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		return fakeBackend(0)(r)
	})
	defer srv.Close()
	data, out := t.TempDir(), t.TempDir()
	writeData(t, data, 2)
	first := make(chan error, 1)
	go func() {
		_, err := bench.Run(context.Background(), options(srv, data, out))
		first <- err
	}()
	<-started
	_, err := bench.Run(context.Background(), options(srv, data, out))
	close(release)
	if !errors.Is(err, filelock.ErrHeld) || !strings.Contains(err.Error(), "run directory "+out+" is in use") {
		t.Fatalf("second run: %v, want filelock.ErrHeld naming %s", err, out)
	}
	if err := <-first; err != nil {
		t.Fatalf("first run: %v", err)
	}
	if _, err := bench.Run(context.Background(), options(srv, data, out)); err != nil {
		t.Fatalf("a run after the first ended: %v", err)
	}
}

// TestRunBoundsHugeAnswers has the model under test answer 50 MB per
// sample: each sample fails as a transport failure naming the cap, the judge
// is never asked, and the run's heap stays within a few caps per sample in
// flight instead of growing with the answers.
func TestRunBoundsHugeAnswers(t *testing.T) {
	srv := fakellm.New(func(*fakellm.Request) fakellm.Reply { return fakellm.Reply{ContentBytes: 50 << 20} })
	defer srv.Close()
	data, out := t.TempDir(), t.TempDir()
	writeData(t, data, 4)
	o := options(srv, data, out)
	o.Concurrency = 2
	// A small cap keeps the bound far below what reading the answers would
	// take (two 50 MiB answers at once), so the check holds however late the
	// collector runs: even if nothing read were ever freed, four capped reads
	// with their buffer growth stay under the limit.
	const answerCap = 4 << 20
	o.Model = worldmodel.New(srv.URL, "wm", &worldmodel.Options{MaxRetryDelay: 5 * time.Millisecond, Timeout: 5 * time.Second, MaxResponseBytes: answerCap})
	var sum *bench.Summary
	var err error
	grew := fakellm.HeapGrowth(func() { sum, err = bench.Run(context.Background(), o) })
	t.Logf("4 samples answered 50 MiB each, 2 in flight, cap %d MiB: heap in use grew by at most %.1f MiB", answerCap>>20, float64(grew)/(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed[bench.FailTransport] != 4 || srv.Count() != 4 {
		t.Fatalf("failed %v after %d requests, want 4 transport failures from 4 model requests", sum.Failed, srv.Count())
	}
	for _, r := range readJudged(t, filepath.Join(out, bench.JudgedFile)) {
		if !strings.Contains(r.Error, fmt.Sprintf("larger than the response cap: more than %d bytes", answerCap)) {
			t.Errorf("row %s: error %q does not name the cap", r.Sample, r.Error)
		}
	}
	if limit := uint64(64 << 20); grew > limit {
		t.Fatalf("heap in use grew by %d MiB, want under %d MiB (reading two answers whole would take 100)", grew>>20, limit>>20)
	}
}

// countingModel answers at once and records how many calls it holds at
// most; started is closed when the call number `after` begins.
type countingModel struct {
	mu          sync.Mutex
	calls, now  int
	most, after int
	started     chan struct{}
	hold        time.Duration
}

func (m *countingModel) Complete(ctx context.Context, _ worldmodel.Request) (*worldmodel.Response, error) {
	m.mu.Lock()
	m.calls++
	m.now++
	m.most = max(m.most, m.now)
	if m.calls == m.after {
		close(m.started)
	}
	m.mu.Unlock()
	time.Sleep(m.hold)
	m.mu.Lock()
	m.now--
	m.mu.Unlock()
	return &worldmodel.Response{Content: "<predicted_observation>x</predicted_observation>", FinishReason: "stop"}, nil
}

// blockingRules scores once started is closed (or gives up after a while,
// failing the test).
type blockingRules struct {
	t       *testing.T
	started chan struct{}
}

func (r blockingRules) Rules(*trajectory.Record, string) bench.Verdict {
	select {
	case <-r.started:
	case <-time.After(time.Minute): // a hang guard: a kept slot blocks the call for ever
		r.t.Error("no further model call while the rules judged: the sample kept its slot")
	}
	return bench.Verdict{Scores: bench.Scores{Format: 3, Factuality: 3, Consistency: 3, Realism: 3, Quality: 3}}
}

// TestRulesJudgingFreesTheSlot: a sample the rules judge scores no longer
// counts against the concurrency, so the next request goes out while it
// is judged, and the model still never holds more calls than that.
func TestRulesJudgingFreesTheSlot(t *testing.T) {
	data := t.TempDir()
	writeData(t, data, 12)
	const conc = 2
	m := &countingModel{after: conc + 1, started: make(chan struct{}), hold: 5 * time.Millisecond}
	sum, err := bench.Run(context.Background(), &bench.Options{Data: data, Out: t.TempDir(), Concurrency: conc,
		Model: m, ModelName: "wm", Rules: blockingRules{t: t, started: m.started}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done != 12 || m.calls != 12 {
		t.Errorf("%d samples done, %d model calls; want 12 and 12", sum.Done, m.calls)
	}
	if m.most > conc {
		t.Errorf("the model held %d calls at once, more than the concurrency %d", m.most, conc)
	}
}

// TestNoCacheNoKey: without a cache (--no-cache) a request is never hashed
// (hashing serializes every message of a ~185 KB row), lookups miss
// without being counted, and with one the key is the request's hash.
func TestNoCacheNoKey(t *testing.T) {
	req := worldmodel.Request{Messages: []worldmodel.Message{{Role: "user", Content: strings.Repeat("x", 1<<16)}}}
	var none *answercache.Cache
	if k := none.Key(req, "wm"); k != "" {
		t.Errorf("a nil cache made key %q", k)
	}
	if _, ok := none.Get(""); ok || none.Hits() != 0 || none.Misses() != 0 {
		t.Errorf("a nil cache answered or counted: hits %d misses %d", none.Hits(), none.Misses())
	}
	c, err := answercache.OpenCache(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if k, want := c.Key(req, "wm"), req.Hash("wm"); k != want {
		t.Errorf("cache key %q, want the request hash %q", k, want)
	}
}
