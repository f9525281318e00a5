package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

var actionRe = regexp.MustCompile(`ACTION-(\d+)-\d+`)

// sampleNo is the sample a fake request is about (every text of sample n
// mentions ACTION-n-k).
func sampleNo(r *fakellm.Request) int {
	m := actionRe.FindStringSubmatch(r.Messages[len(r.Messages)-1].Content)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// benchBackend answers as the model under test ("wm") and as a judge in the
// published answer format ("judge"), deterministically per sample.
func benchBackend(delay time.Duration) fakellm.Handler {
	return func(r *fakellm.Request) fakellm.Reply {
		n := sampleNo(r)
		if r.Model == "judge" {
			s := 1 + n%5
			return fakellm.Reply{Delay: delay, Content: fmt.Sprintf("<think>weighing</think>Reasoning.\n<final_evaluation>\n```json\n"+
				`{"strengths": ["s%d"], "weaknesses": ["w"], "scores": {"format": %d, "factuality": %d, "consistency": 4, "realism": 5, "quality": %d}}`+
				"\n```\n</final_evaluation>", n, s, 6-s, 1+n%3)}
		}
		return fakellm.Reply{Delay: delay, Reasoning: "thinking", Content: fmt.Sprintf("<predicted_observation>OBS-%d-pred</predicted_observation>", n)}
	}
}

// writeBenchData writes n three-turn samples spread over the seven domains.
func writeBenchData(t *testing.T, dir string, n int) {
	t.Helper()
	domains := []string{"android", "mcp", "os", "search", "swe", "terminal", "web"}
	var bufs = map[string]*bytes.Buffer{}
	for i := 0; i < n; i++ {
		d := domains[i%len(domains)]
		var prompts, responses []string
		for k := 1; k <= 3; k++ {
			prompts = append(prompts, fmt.Sprintf("### Turn %d\n**Action:**\nACTION-%d-%d", k, i, k))
			responses = append(responses, fmt.Sprintf("**Environment Observation:**\nOBS-%d-%d", i, k))
		}
		turn := 1 + i%3
		b, _ := json.Marshal(map[string]any{"task": "suite/" + d, "id": i / 3, "prompt": prompts, "response": responses,
			"current_prompt": prompts[turn-1], "system_str": "simulate " + d, "turn_idx": turn, "total_turns": 3})
		if bufs[d] == nil {
			bufs[d] = new(bytes.Buffer)
		}
		bufs[d].Write(append(b, '\n'))
	}
	for d, b := range bufs {
		if err := os.WriteFile(filepath.Join(dir, d+"_test.jsonl"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// buildBinary builds the agentworld binary into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentworld")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Built with the test's own -race flag: its packages are then the ones
	// this test binary was compiled from, cached, rather than a second full
	// compile of the tree (minutes on a cold CI cache).
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.CommandContext(ctx, "go", append(args, "../../cmd/agentworld")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// rowSamples returns the sample numbers (from the ACTION tag in the row's
// prediction or id) of the complete rows of a JSONL result file.
func rowSamples(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r struct {
			Prediction string `json:"prediction"`
			Failure    string `json:"failure"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue // a torn last line is not a finished sample
		}
		out[r.Prediction] = true
	}
	return out
}

// TestBenchRunSurvivesKill9 is the resume acceptance test: bench run is
// killed with SIGKILL midway, rerun with the same command, and must not
// request finished samples again and must end with the scores of an
// uninterrupted run.
func TestBenchRunSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	// While stall is set, requests past the 60th judge request wait for it
	// to close: the killed run cannot finish before the kill, however a
	// loaded machine schedules the two processes.
	var (
		stallMu sync.Mutex
		stall   chan struct{}
		judges  int
	)
	backend := benchBackend(15 * time.Millisecond)
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		var hold chan struct{}
		stallMu.Lock()
		if stall != nil {
			if r.Model == "judge" {
				judges++
			}
			if judges > 60 {
				hold = stall
			}
		}
		stallMu.Unlock()
		if hold != nil {
			<-hold
		}
		return backend(r)
	})
	defer srv.Close()
	release := func() {
		stallMu.Lock()
		defer stallMu.Unlock()
		if stall != nil {
			close(stall)
			stall = nil
		}
	}
	defer release() // before srv.Close, which waits for held requests
	data := t.TempDir()
	const samples = 120
	writeBenchData(t, data, samples)
	args := func(out string) []string {
		return []string{"bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
			"--judge-url", srv.URL, "--judge-model", "judge", "--out", out, "--concurrency", "4", "--retries", "0", "--judge-retries", "0"}
	}
	run := func(out string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args(out)...)
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
		err := cmd.Run()
		return stdout.Bytes(), err
	}

	// The uninterrupted reference.
	ref := t.TempDir()
	if out, err := run(ref); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	srv.Reset()

	// Start, wait until some samples are judged, kill -9.
	stallMu.Lock()
	stall, judges = make(chan struct{}), 0
	stallMu.Unlock()
	out := t.TempDir()
	cmd := exec.Command(bin, args(out)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		judged := 0
		for _, r := range srv.Requests() {
			if r.Model == "judge" {
				judged++
			}
		}
		if judged >= 40 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the run did not get going")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	release()
	predicted := rowSamples(t, filepath.Join(out, bench.PredictionsFile))
	judged := rowSamples(t, filepath.Join(out, bench.JudgedFile))
	if len(judged) == 0 || len(judged) >= samples {
		t.Fatalf("%d samples judged at the kill; the test needs some but not all", len(judged))
	}
	if _, err := os.Stat(filepath.Join(out, bench.ScoresFile)); err == nil {
		t.Fatal("the killed run already finished; the test needs an interrupted one")
	}

	// Rerun the same command to the end.
	srv.Reset()
	if stdout, err := run(out); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, stdout)
	}
	for _, r := range srv.Requests() {
		key := fmt.Sprintf("OBS-%d-pred", sampleNo(r))
		if r.Model == "wm" && predicted[key] {
			t.Errorf("sample %d was predicted before the kill and requested from the model again", sampleNo(r))
		}
		if r.Model == "judge" && judged[key] {
			t.Errorf("sample %d was judged before the kill and sent to the judge again", sampleNo(r))
		}
	}
	if srv.Count() == 0 || srv.Count() >= 2*samples {
		t.Errorf("the resumed run made %d calls; want some, fewer than a full run's %d", srv.Count(), 2*samples)
	}
	want, err := os.ReadFile(filepath.Join(ref, bench.ScoresFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, bench.ScoresFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("scores after kill and resume differ from an uninterrupted run:\nwant %s\n got %s", want, got)
	}
	// The final judged files hold the same samples in the same order.
	if a, b := sampleOrder(t, filepath.Join(ref, bench.JudgedFile)), sampleOrder(t, filepath.Join(out, bench.JudgedFile)); strings.Join(a, ",") != strings.Join(b, ",") || len(a) != samples {
		t.Fatalf("judged order differs or incomplete: %d vs %d rows", len(a), len(b))
	}
}

func sampleOrder(t *testing.T, path string) []string {
	t.Helper()
	rows, err := bench.ReadJudged(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Sample)
	}
	return out
}

// runBenchCLI runs the command tree in process.
func runBenchCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := New()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return stdout.String(), stderr.String(), err
}

// TestBenchRunJudgeAndScoreOnExamples runs the quickstart path in process:
// the example dataset, a fake model, the rubric judge and the rules judge,
// then bench score --json; and the judge stage alone on the predictions.
func TestBenchRunJudgeAndScoreOnExamples(t *testing.T) {
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if r.Model == "judge" {
			return fakellm.Reply{Content: "<final_evaluation>```json\n{\"strengths\":[],\"weaknesses\":[],\"scores\":{\"format\":5,\"factuality\":3,\"consistency\":4,\"realism\":4,\"quality\":3}}\n```</final_evaluation>"}
		}
		// Echo the real observation of the evaluated turn back: the last
		// user message is the evaluated prompt, so answer with a fixed text.
		return fakellm.Reply{Content: "<think>x</think><predicted_observation>**Environment Observation:**\nok</predicted_observation>"}
	})
	defer srv.Close()
	out := t.TempDir()
	stdout, stderr, err := runBenchCLI(t, "bench", "run", "--data", "../../examples/bench", "--model-url", srv.URL, "--model", "wm",
		"--judge-url", srv.URL, "--judge-model", "judge", "--out", out)
	if err != nil {
		t.Fatalf("bench run: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "Overall (mean of domain scores, leaderboard headline)") || !strings.Contains(stderr, "samples: 25 done of 25") {
		t.Fatalf("bench run output:\n%s\n%s", stdout, stderr)
	}
	for _, f := range []string{bench.RunFile, bench.PredictionsFile, bench.JudgedFile, bench.ScoresFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("run dir lacks %s", f)
		}
	}
	stdout, _, err = runBenchCLI(t, "bench", "score", "--judged", filepath.Join(out, bench.JudgedFile), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Domains map[string]struct {
			N     int     `json:"n"`
			Total float64 `json:"total"`
		} `json:"domains"`
		Overall float64 `json:"overall_domain_mean"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("score --json: %v\n%s", err, stdout)
	}
	if len(rep.Domains) != 7 || rep.Domains["mcp"].N != 5 || rep.Overall != 70 {
		t.Fatalf("score: %+v", rep)
	}

	// The judge stage alone, offline, on the same predictions.
	rules := t.TempDir()
	stdout, stderr, err = runBenchCLI(t, "bench", "judge", "--predictions", filepath.Join(out, bench.PredictionsFile), "--judge", "rules", "--out", rules)
	if err != nil {
		t.Fatalf("bench judge --judge rules: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "offline rules scorer") {
		t.Fatalf("rules report not marked as such:\n%s", stdout)
	}
	// Compare the rubric-judged run with the rules-scored one, and render
	// the HTML report.
	// The two were scored by different judges: refused unless asked, then
	// labelled; the direction of the deltas is stated.
	if _, _, err = runBenchCLI(t, "bench", "compare", out, rules); err == nil || !strings.Contains(err.Error(), "different judges") || !strings.Contains(err.Error(), "judge+") && !strings.Contains(err.Error(), ": judge") {
		t.Fatalf("bench compare of a rubric-judged and a rules-scored run: %v, want a refusal naming the judges", err)
	}
	stdout, _, err = runBenchCLI(t, "bench", "compare", "--mixed-judges", out, rules)
	if err != nil || !strings.Contains(stdout, filepath.Base(rules)) || !strings.Contains(stdout, "mcp") ||
		!strings.Contains(stdout, "different judges") || !strings.Contains(stdout, "judged by rules") ||
		!strings.Contains(stdout, "Δ = this run − "+filepath.Base(out)+": positive means this run scores higher") {
		t.Fatalf("bench compare --mixed-judges: %v\n%s", err, stdout)
	}
	page := filepath.Join(t.TempDir(), "report.html")
	if _, stderr, err := runBenchCLI(t, "bench", "report", out, "--html", page); err != nil {
		t.Fatalf("bench report: %v\n%s", err, stderr)
	}
	if b, err := os.ReadFile(page); err != nil || !bytes.Contains(b, []byte("<svg ")) || !bytes.Contains(b, []byte("<html")) {
		t.Fatalf("report page: %v (%d bytes)", err, len(b))
	}
	// Without --html the report is text on stdout: the score table.
	stdout, _, err = runBenchCLI(t, "bench", "report", out)
	if err != nil || !strings.Contains(stdout, "AgentWorldBench scores") || !strings.Contains(stdout, "95% CI") || !strings.Contains(stdout, "mcp") {
		t.Fatalf("bench report (text): %v\n%s", err, stdout)
	}

	srv.Reset()
	// Rerunning the whole command costs nothing.
	if _, stderr, err := runBenchCLI(t, "bench", "run", "--data", "../../examples/bench", "--model-url", srv.URL, "--model", "wm",
		"--judge-url", srv.URL, "--judge-model", "judge", "--out", out); err != nil || srv.Count() != 0 || !strings.Contains(stderr, "25 resumed") {
		t.Fatalf("rerun: %v, %d calls\n%s", err, srv.Count(), stderr)
	}
}

// TestBenchFlagErrors: a command refused for its flags says which flag,
// and leaves nothing on disk (no run directory, no cache).
func TestBenchFlagErrors(t *testing.T) {
	y := filepath.Join(t.TempDir(), "y")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "infer", "--data", "x"}, "--model"},
		{[]string{"bench", "run", "--data", "x", "--out", y, "--model-url", "u", "--model", "m"}, "--judge-url"},
		{[]string{"bench", "run", "--data", "x", "--out", y, "--model-url", "u", "--model", "m", "--judge", "oracle"}, "want llm or rules"},
		{[]string{"bench", "infer", "--data", "x", "--out", y, "--model-url", "u", "--model", "m", "--extra-body", "[1"}, "--extra-body"},
		{[]string{"bench", "score"}, "--judged"},
	} {
		_, _, err := runBenchCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want one mentioning %s", tc.args, err, tc.want)
		}
		if _, err := os.Stat(y); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: refused, yet --out exists (%v)", tc.args, err)
		}
	}
}

// TestReadmeBenchQuickstart runs the bench page's quickstart commands as
// written (in process, with runs/ in a temporary directory), so the
// quickstart keeps working on a fresh machine without a model server.
func TestReadmeBenchQuickstart(t *testing.T) {
	readme, err := os.ReadFile("../../docs/benchmark.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- bench-quickstart -->\n```sh\n")
	if !ok {
		t.Fatal("docs/benchmark.md has no bench quickstart block")
	}
	block, _, _ = strings.Cut(block, "```")
	runs := t.TempDir()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		args := strings.Fields(line)
		if len(args) < 2 || args[0] != "agentworld" {
			t.Fatalf("quickstart line %q is not an agentworld command", line)
		}
		args = args[1:]
		for i, a := range args {
			switch {
			case strings.HasPrefix(a, "runs/"):
				args[i] = filepath.Join(runs, strings.TrimPrefix(a, "runs/"))
			case a == "examples/bench":
				args[i] = "../../examples/bench"
			}
		}
		stdout, stderr, err := runBenchCLI(t, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s", line, err, stdout, stderr)
		}
		n++
	}
	if n < 3 {
		t.Fatalf("quickstart has %d commands, want run, score and report", n)
	}
	for _, f := range []string{"copy/judged.jsonl", "copy/scores.json", "copy/report.html"} {
		if _, err := os.Stat(filepath.Join(runs, f)); err != nil {
			t.Errorf("quickstart did not produce %s", f)
		}
	}
}

// TestBenchRunSendsPublishedMessages checks the exact conversations the
// model and the rubric judge receive for a multi-turn example record (the
// terminal row evaluated at turn 4).
func TestBenchRunSendsPublishedMessages(t *testing.T) {
	src, err := os.ReadFile("../../examples/bench/terminal_test.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var line []byte
	for _, l := range bytes.Split(src, []byte("\n")) {
		if bytes.Contains(l, []byte(`"turn_idx": 4`)) {
			line = l
		}
	}
	if line == nil {
		t.Fatal("no terminal example evaluated at turn 4")
	}
	var rec trajectory.Record
	if err := json.Unmarshal(line, &rec); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "terminal_test.jsonl"), append(line, '\n'), 0o644)
	const gen = "<think>plan</think>\n<predicted_observation>\n**Environment Observation:**\n$ pytest\n1 passed\n</predicted_observation>"
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if r.Model == "judge" {
			return fakellm.Reply{Content: "<final_evaluation>```json\n{\"scores\":{\"format\":5,\"factuality\":4,\"consistency\":4,\"realism\":5,\"quality\":4}}\n```</final_evaluation>"}
		}
		return fakellm.Reply{Content: gen}
	})
	defer srv.Close()
	if _, stderr, err := runBenchCLI(t, "bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
		"--judge-url", srv.URL, "--judge-model", "judge", "--out", t.TempDir()); err != nil {
		t.Fatalf("bench run: %v\n%s", err, stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	convert := func(ms []worldmodel.Message) []fakellm.Message {
		var out []fakellm.Message
		for _, m := range ms {
			out = append(out, fakellm.Message{Role: m.Role, Content: m.Content})
		}
		return out
	}
	wantModel := []fakellm.Message{{Role: "system", Content: rec.SystemStr}}
	for i := 0; i < 3; i++ {
		wantModel = append(wantModel, fakellm.Message{Role: "user", Content: rec.Prompt[i]}, fakellm.Message{Role: "assistant", Content: rec.Response[i]})
	}
	wantModel = append(wantModel, fakellm.Message{Role: "user", Content: rec.Prompt[3]})
	if d := cmp.Diff(wantModel, reqs[0].Messages); d != "" {
		t.Errorf("model messages (-want +got):\n%s", d)
	}
	if rec.Prompt[3] == rec.CurrentPrompt {
		t.Error("the example's last prompt should carry the instruction suffix that current_prompt lacks")
	}
	wantMsgs, _ := judge.Messages(nil, &rec, conversation.ExtractPrediction(gen))
	wantJudge := convert(wantMsgs)
	if d := cmp.Diff(wantJudge, reqs[1].Messages); d != "" {
		t.Errorf("judge messages (-want +got):\n%s", d)
	}
	user := reqs[1].Messages[1].Content
	for _, want := range []string{"# Context (Historical Interactions):", "# Current Turn:\n\n" + rec.CurrentPrompt, "$ pytest\n1 passed"} {
		if !strings.Contains(user, want) {
			t.Errorf("judge prompt lacks %q", want)
		}
	}
	if strings.Contains(user, "**Environment Observation:**\n$ pytest") {
		t.Error("the observation marker was not stripped from the prediction")
	}
}

// TestBenchRunNoValidSampleAndRetryFailed: a run whose judge never parses
// exits with an error though it finished, a plain rerun keeps those
// failures, and --retry-failed judges them again (the predictions are
// reused: the model is not called again).
func TestBenchRunNoValidSampleAndRetryFailed(t *testing.T) {
	var judgeWorks atomic.Bool
	srv := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if r.Model == "judge" {
			if !judgeWorks.Load() {
				return fakellm.Reply{Content: "I would rather not say."}
			}
			return fakellm.Reply{Content: "<final_evaluation>```json\n{\"strengths\":[],\"weaknesses\":[],\"scores\":{\"format\":5,\"factuality\":3,\"consistency\":4,\"realism\":4,\"quality\":3}}\n```</final_evaluation>"}
		}
		return fakellm.Reply{Content: "<predicted_observation>ok</predicted_observation>"}
	})
	defer srv.Close()
	out := t.TempDir()
	args := []string{"bench", "run", "--data", "../../examples/bench", "--model-url", srv.URL, "--model", "wm",
		"--judge-url", srv.URL, "--judge-model", "judge", "--judge-retries", "0", "--out", out}
	_, stderr, err := runBenchCLI(t, args...)
	if !errors.Is(err, errNoValidSample) || !strings.Contains(stderr, "judge_unparseable 25") {
		t.Fatalf("every judging failed: err %v, want errNoValidSample\n%s", err, stderr)
	}
	judgeWorks.Store(true)
	if _, _, err := runBenchCLI(t, args...); !errors.Is(err, errNoValidSample) {
		t.Fatalf("plain rerun: err %v, want the failures kept", err)
	}
	srv.Reset()
	stdout, stderr, err := runBenchCLI(t, append(args, "--retry-failed")...)
	if err != nil {
		t.Fatalf("--retry-failed: %v\n%s", err, stderr)
	}
	if srv.Count() != 25 || !strings.Contains(stderr, "samples: 25 done of 25 (0 resumed") || !strings.Contains(stdout, "Overall") {
		t.Fatalf("--retry-failed: %d calls (want 25 judge calls)\n%s\n%s", srv.Count(), stdout, stderr)
	}
}

// TestBenchStopNamesRowFirst: when bench run or bench infer stops on a bad
// row, the first line of the error main prints is the row's file:line and
// reason, not the context.Canceled that stopping induced in the other
// workers (which used to come first and push the reason to the next line).
func TestBenchStopNamesRowFirst(t *testing.T) {
	srv := fakellm.New(benchBackend(0))
	defer srv.Close()
	// Every row's system_str ("simulate <domain>") has none of the
	// sections a template version needs, so --template v0 fails each.
	plain := t.TempDir()
	writeBenchData(t, plain, 40)
	malformed := t.TempDir()
	writeBenchData(t, malformed, 40)
	osRows := filepath.Join(malformed, "os_test.jsonl")
	b, err := os.ReadFile(osRows)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 6 {
		t.Fatalf("os_test.jsonl has %d rows, want 6", n)
	}
	if err := os.WriteFile(osRows, append(b, "{not json\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	model := []string{"--model-url", srv.URL, "--model", "wm"}
	judge := []string{"--judge-url", srv.URL, "--judge-model", "judge"}
	anyRow := regexp.QuoteMeta(plain+string(filepath.Separator)) + `[a-z]+_test\.jsonl:\d+: system_str: template v0: `
	badLine := regexp.QuoteMeta(osRows) + `:7: invalid character`
	for _, tc := range []struct {
		name  string
		args  []string
		first string // regexp the error's first line must match
	}{
		{"infer template", slices.Concat([]string{"bench", "infer", "--data", plain, "--template", "v0"}, model), anyRow},
		{"run template", slices.Concat([]string{"bench", "run", "--data", plain, "--template", "v0"}, model, judge), anyRow},
		{"infer malformed line", slices.Concat([]string{"bench", "infer", "--data", malformed}, model), badLine},
		{"run malformed line", slices.Concat([]string{"bench", "run", "--data", malformed}, model, judge), badLine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := runBenchCLI(t, append(tc.args, "--out", t.TempDir())...)
			if err == nil {
				t.Fatalf("no error\n%s", stderr)
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			if !regexp.MustCompile("^" + tc.first).MatchString(first) {
				t.Errorf("first line of the error %q does not name the row (want %s); whole error:\n%v", first, tc.first, err)
			}
			if strings.Contains(err.Error(), context.Canceled.Error()) {
				t.Errorf("the error carries the cancellation stopping induced:\n%v", err)
			}
		})
	}
}
