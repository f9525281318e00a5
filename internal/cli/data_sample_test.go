package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/rejection"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// The fake teacher's design: a sample whose last user message hashes to
// less than keepPerTen (of 10) gets beams graded 3, 5, 2, 4 — its best beam
// scores 0.9 × 25 = 22.5 with the rule failing, above the default
// min_reward 18 — and every other sample gets 3, 2, 1, 3 (best 13.5, below
// it). The keep rate is therefore exactly the share of samples of the first
// kind, which the test computes from the samples alone.
const keepPerTen = 7

var (
	goodGrades = []int{3, 5, 2, 4}
	badGrades  = []int{3, 2, 1, 3}
	gradeRe    = regexp.MustCompile(`GRADE-(\d)`)
)

func designedKeep(lastUser string) bool {
	h := fnv.New32a()
	h.Write([]byte(lastUser))
	return h.Sum32()%10 < keepPerTen
}

// teacherKey identifies a teacher request: its last user message and its
// seed (the beam).
func teacherKey(lastUser string, beam int) string { return fmt.Sprintf("%d\x00%s", beam, lastUser) }

// sampleBackend answers as the teacher ("teacher": deterministic reasoning,
// graded answers; odd beams think inline, even beams in reasoning_content)
// and as the judge ("judge": every dimension the grade the prediction
// carries), and counts the teacher requests by key.
type sampleBackend struct {
	delay time.Duration
	// judge is the judge's model name; "" means "judge".
	judge  string
	mu     sync.Mutex
	counts map[string]int
	// killed counts the teacher requests that carry [killedRunKey]: those
	// of a run a test killed, which the server may read after the kill.
	killed map[string]int
	// stall, when set, holds the killed run's teacher requests past its
	// first stallAfter until it is closed: that run cannot finish before
	// the test kills it, however a loaded machine schedules the processes.
	stall      chan struct{}
	stallAfter int
	killedN    int
}

// killedRunKey is the API key a kill -9 test gives the run it kills, so
// that the backend can tell that run's requests from the resumed run's.
const killedRunKey = "killed-run"

func (sb *sampleBackend) handle(r *fakellm.Request) fakellm.Reply {
	if r.Model == sb.judge || (sb.judge == "" && r.Model == "judge") {
		g := 1
		for _, m := range r.Messages {
			if x := gradeRe.FindStringSubmatch(m.Content); x != nil {
				g, _ = strconv.Atoi(x[1])
			}
		}
		return fakellm.Reply{Content: fmt.Sprintf("<final_evaluation>\n```json\n"+
			`{"strengths": ["s"], "weaknesses": ["w"], "scores": {"format": %d, "factuality": %d, "consistency": %d, "realism": %d, "quality": %d}}`+
			"\n```\n</final_evaluation>", g, g, g, g, g)}
	}
	last := r.Messages[len(r.Messages)-1].Content
	seed, _ := r.Body["seed"].(float64)
	beam := int(seed)
	var hold chan struct{}
	sb.mu.Lock()
	if r.Header.Get("Authorization") == "Bearer "+killedRunKey {
		sb.killed[teacherKey(last, beam)]++
		if sb.killedN++; sb.stall != nil && sb.killedN > sb.stallAfter {
			hold = sb.stall
		}
	} else {
		sb.counts[teacherKey(last, beam)]++
	}
	sb.mu.Unlock()
	if hold != nil {
		<-hold
	}
	grades := badGrades
	if designedKeep(last) {
		grades = goodGrades
	}
	g := grades[(beam-1)%len(grades)]
	reasoning := fmt.Sprintf("Beam %d weighs the action; grade %d.", beam, g)
	answer := fmt.Sprintf("<predicted_observation>\nGRADE-%d screen\n</predicted_observation>", g)
	if beam%2 == 0 {
		return fakellm.Reply{Delay: sb.delay, Reasoning: reasoning, Content: answer}
	}
	return fakellm.Reply{Delay: sb.delay, Content: "<think>" + reasoning + "</think>\n" + answer}
}

func (sb *sampleBackend) teacherRequests() map[string]int {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	out := make(map[string]int, len(sb.counts))
	for k, v := range sb.counts {
		out[k] = v
	}
	return out
}

func newSampleBackend(delay time.Duration) (*sampleBackend, *fakellm.Server) {
	sb := &sampleBackend{delay: delay, counts: map[string]int{}, killed: map[string]int{}}
	return sb, fakellm.New(sb.handle)
}

func sampleArgs(srvURL, out string, inputs ...string) []string {
	return append([]string{"data", "sample", "--out", out, "--teacher-url", srvURL, "--teacher-model", "teacher",
		"--judge-url", srvURL, "--judge-model", "judge", "--teacher-retries", "0", "--progress-interval", "1h", "--json"}, inputs...)
}

// readLines decodes every line of a JSONL file into T.
func readLines[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	return out
}

func lastUser(s *expand.Sample) string {
	p := s.Prompt()
	return p[len(p)-1].Content
}

// expandRecordings runs the bundled recordings through data convert (to
// benchmark records and back, which drops the unanswered last actions) and
// data expand, and returns the samples file.
func expandRecordings(t *testing.T, dir string) string {
	t.Helper()
	recordings, err := filepath.Glob("../../examples/recordings/*.jsonl")
	if err != nil || len(recordings) == 0 {
		t.Fatalf("example recordings missing: %v", err)
	}
	var in bytes.Buffer
	for _, r := range readRecordingTrajectories(t, recordings) {
		b, err := trajectory.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(append(b, '\n'))
	}
	trajs := filepath.Join(dir, "recordings.jsonl")
	if err := os.WriteFile(trajs, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	bench := filepath.Join(dir, "records_test.jsonl")
	converted := filepath.Join(dir, "trajectories.jsonl")
	samples := filepath.Join(dir, "samples.jsonl")
	for _, args := range [][]string{
		{"convert", "--to", "bench", "--progress=false", "--on-error", "fatal", "-o", bench, trajs},
		{"convert", "--from", "bench", "--progress=false", "--on-error", "fatal", "-o", converted, bench},
		{"expand", "--progress=false", "--on-error", "fatal", "-o", samples, converted},
	} {
		if _, stderr, err := runData(t, args...); err != nil {
			t.Fatalf("data %s: %v\n%s", args[0], err, stderr)
		}
	}
	return samples
}

// TestDataSampleEndToEnd: recordings → convert → expand → sample against a
// fake teacher and a fake judge. The keep rate is the fake's designed rate
// exactly, the SFT targets carry the teacher's reasoning, the candidates
// and pairs files read back, every beam is requested once, and a rerun
// requests nothing and leaves the outputs as they were.
func TestDataSampleEndToEnd(t *testing.T) {
	dir := t.TempDir()
	samplesPath := expandRecordings(t, dir)
	samples := readLines[expand.Sample](t, samplesPath)
	if len(samples) < 10 {
		t.Fatalf("%d samples from the recordings; the test needs more", len(samples))
	}
	want := 0
	for i := range samples {
		if designedKeep(lastUser(&samples[i])) {
			want++
		}
	}
	if want == 0 || want == len(samples) {
		t.Fatalf("the design keeps %d of %d samples; the test needs both kinds", want, len(samples))
	}

	sb, srv := newSampleBackend(0)
	defer srv.Close()
	out := filepath.Join(dir, "sampled")
	stdout, stderr, err := runBenchCLI(t, sampleArgs(srv.URL, out, samplesPath)...)
	if err != nil {
		t.Fatalf("data sample: %v\n%s", err, stderr)
	}
	var sum rejection.Summary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("summary: %v\n%s", err, stdout)
	}
	if sum.Total.Samples != int64(len(samples)) || sum.Total.Kept != int64(want) || sum.Total.KeepRate != float64(want)/float64(len(samples)) {
		t.Errorf("input → kept %d → %d (rate %v), want %d → %d (rate %v)", sum.Total.Samples, sum.Total.Kept, sum.Total.KeepRate,
			len(samples), want, float64(want)/float64(len(samples)))
	}
	if sum.Total.Beams != 4*int64(len(samples)) || sum.Total.Pairs != int64(want) || sum.Judge != "judge" || len(sum.Domains) < 5 {
		t.Errorf("summary %+v", sum.Total)
	}
	if b, _ := os.ReadFile(filepath.Join(out, rejection.SummaryFile)); !strings.Contains(string(b), `"keep_rate"`) {
		t.Error("summary.json not written")
	}

	// Every beam requested exactly once.
	reqs := sb.teacherRequests()
	if len(reqs) != 4*len(samples) {
		t.Errorf("%d distinct teacher requests, want %d", len(reqs), 4*len(samples))
	}
	for k, n := range reqs {
		if n != 1 {
			t.Errorf("teacher request %q made %d times", k, n)
		}
	}

	// SFT: one line per kept sample, target = reasoning + tagged observation.
	sft := readLines[rejection.SFTLine](t, filepath.Join(out, rejection.SFTFile))
	if len(sft) != want {
		t.Fatalf("%d SFT lines, want %d", len(sft), want)
	}
	for _, l := range sft {
		last := l.Messages[len(l.Messages)-1]
		wantTarget := "<think>\nBeam 2 weighs the action; grade 5.\n</think>\n\n<predicted_observation>\nGRADE-5 screen\n</predicted_observation>"
		if last.Role != "assistant" || last.Content != wantTarget || last.Loss == nil || l.Reward != 22.5 || !strings.HasSuffix(l.ID, "-2") {
			t.Errorf("SFT line %s: target %+v reward %v", l.ID, last, l.Reward)
		}
		if l.Messages[0].Role != "system" || l.Messages[len(l.Messages)-2].Role != "user" {
			t.Errorf("SFT line %s: prompt roles %v", l.ID, l.Messages)
		}
	}

	// Candidates: every beam, ids {trajectory}-{turn}-{beam}, unique.
	cands := readLines[rejection.Candidate](t, filepath.Join(out, rejection.CandidatesFile))
	if len(cands) != 4*len(samples) {
		t.Fatalf("%d candidates, want %d", len(cands), 4*len(samples))
	}
	ids := map[string]bool{}
	for _, c := range cands {
		if c.ID != fmt.Sprintf("%s-%d-%d", c.TrajectoryID, c.Turn, c.Beam) || ids[c.ID] || c.Reward == nil || c.Reward.Score == nil {
			t.Errorf("candidate %+v", c)
		}
		ids[c.ID] = true
		if c.Reasoning != fmt.Sprintf("Beam %d weighs the action; grade %s.", c.Beam, strings.TrimPrefix(strings.Fields(c.Prediction)[0], "GRADE-")) {
			t.Errorf("candidate %s: reasoning %q, prediction %q", c.ID, c.Reasoning, c.Prediction)
		}
	}

	// Pairs: TRL / OpenRLHF shape, chosen better than rejected.
	pairs := readLines[map[string]any](t, filepath.Join(out, rejection.PairsFile))
	if len(pairs) != want {
		t.Fatalf("%d pairs, want %d", len(pairs), want)
	}
	for _, p := range pairs {
		prompt, _ := p["prompt"].([]any)
		chosen, _ := p["chosen"].([]any)
		rejected, _ := p["rejected"].([]any)
		if len(prompt) < 2 || len(chosen) != 1 || len(rejected) != 1 || p["chosen_reward"] != 22.5 || p["rejected_reward"] != 9.0 {
			t.Errorf("pair %v: prompt %d messages, chosen %v, rejected %v, rewards %v / %v", p["id"], len(prompt), chosen, rejected, p["chosen_reward"], p["rejected_reward"])
		}
		if m, _ := chosen[0].(map[string]any); m["role"] != "assistant" || !strings.Contains(m["content"].(string), "GRADE-5") {
			t.Errorf("pair %v: chosen %v", p["id"], m)
		}
	}

	// A rerun requests nothing and changes nothing.
	before := readOutputs(t, out)
	srv.Reset()
	if _, stderr, err := runBenchCLI(t, sampleArgs(srv.URL, out, samplesPath)...); err != nil {
		t.Fatalf("rerun: %v\n%s", err, stderr)
	}
	if srv.Count() != 0 {
		t.Errorf("the rerun of a finished run made %d requests", srv.Count())
	}
	if d := cmp.Diff(before, readOutputs(t, out)); d != "" {
		t.Errorf("outputs changed on rerun:\n%s", d)
	}
	// Other settings into the same directory are refused, naming the flag.
	if _, _, err := runBenchCLI(t, append(sampleArgs(srv.URL, out, samplesPath), "--beams", "2")...); err == nil || !strings.Contains(err.Error(), "different settings") || !strings.Contains(err.Error(), "--out") {
		t.Errorf("a rerun with other settings: %v", err)
	}
}

// readOutputs returns the output files of a sampling directory.
func readOutputs(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, f := range []string{rejection.CandidatesFile, rejection.SFTFile, rejection.PairsFile, rejection.SummaryFile} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		m[f] = string(b)
	}
	return m
}

// writeManySamples writes n expanded samples over three domains.
func writeManySamples(t *testing.T, path string, n int) []expand.Sample {
	t.Helper()
	var buf bytes.Buffer
	var out []expand.Sample
	domains := []string{"terminal", "mcp", "web"}
	for i := 0; i < n; i++ {
		s := expand.Sample{ID: fmt.Sprintf("t%d#2", i), TrajectoryID: fmt.Sprintf("t%d", i), Domain: domains[i%3], Turn: 2, TotalTurns: 2,
			System:  "simulate",
			History: []trajectory.Turn{{Action: fmt.Sprintf("look %d", i), Observation: "a room"}},
			Action:  fmt.Sprintf("open door %d", i), Observation: fmt.Sprintf("door %d opens", i)}
		b, _ := json.Marshal(s)
		buf.Write(append(b, '\n'))
		out = append(out, s)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDataSampleChild is the process TestDataSampleSurvivesKill9 kills.
func TestDataSampleChild(t *testing.T) {
	runChildCLI(t, "AGENTWORLD_SAMPLE_CHILD", "TestDataSampleSurvivesKill9")
}

// runChildCLI runs the command line a kill -9 test put, as JSON, in the
// environment variable env of this re-executed test binary; run directly,
// the test skips.
func runChildCLI(t *testing.T, env, parent string) {
	args := testkit.ChildEnv(t, env, parent)
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		t.Fatal(err)
	}
	_, _, _ = runBenchCLI(t, argv...)
}

// TestDataSampleSurvivesKill9 kills `data sample` (this test binary,
// re-executed) with SIGKILL midway, reruns it, and checks that no beam the
// killed run finished is requested again and that the outputs are
// byte-identical to an uninterrupted run's.
func TestDataSampleSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	samples := writeManySamples(t, in, 150)
	sb, srv := newSampleBackend(10 * time.Millisecond)
	defer srv.Close()
	args := func(out string) []string { return append(sampleArgs(srv.URL, out, in), "--concurrency", "8") }

	ref := filepath.Join(dir, "ref")
	if _, stderr, err := runBenchCLI(t, args(ref)...); err != nil {
		t.Fatalf("reference run: %v\n%s", err, stderr)
	}
	sb.mu.Lock()
	sb.counts = map[string]int{}
	sb.mu.Unlock()

	// The killed run gets answers for half its 600 beams (120 journal
	// lines come before that), then none until it is dead.
	stall := make(chan struct{})
	sb.mu.Lock()
	sb.stall, sb.stallAfter = stall, 300
	sb.mu.Unlock()
	var unstall sync.Once
	release := func() { unstall.Do(func() { close(stall) }) }
	defer release() // before srv.Close, which waits for held requests

	out := filepath.Join(dir, "killed")
	argv, _ := json.Marshal(args(out))
	cmd := testkit.Child("TestDataSampleChild", "AGENTWORLD_SAMPLE_CHILD="+string(argv), envconfig.ModelAPIKey.Name+"="+killedRunKey)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(out, rejection.JournalFile)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(journal)
		if bytes.Count(b, []byte("\n")) >= 120 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal("the child journaled too little in two minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	release()
	if _, err := os.Stat(filepath.Join(out, rejection.SummaryFile)); err == nil {
		t.Fatal("the child finished before the kill")
	}
	finished := map[string]bool{}
	for _, a := range journalAnswers(t, journal) {
		finished[teacherKey(lastUser(&samples[a[0]]), a[1])] = true
	}
	if len(finished) == 0 || len(finished) >= 4*len(samples) {
		t.Fatalf("%d beams finished at the kill; the test needs some but not all", len(finished))
	}
	sb.mu.Lock()
	sb.counts = map[string]int{}
	sb.mu.Unlock()

	if _, stderr, err := runBenchCLI(t, args(out)...); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, stderr)
	}
	resumed := sb.teacherRequests()
	sb.mu.Lock()
	killedReqs := maps.Clone(sb.killed)
	sb.mu.Unlock()
	for k := range resumed {
		if finished[k] {
			t.Errorf("beam %q was answered before the kill and was requested again", k)
		}
	}
	for k, n := range resumed {
		if n != 1 {
			t.Errorf("beam %q requested %d times by the resumed run", k, n)
		}
	}
	// Every beam was requested by one of the two runs.
	if got := len(unionKeys(killedReqs, resumed)); got != 4*len(samples) {
		t.Errorf("%d distinct beams requested over both runs, want %d", got, 4*len(samples))
	}
	if d := cmp.Diff(readOutputs(t, ref), readOutputs(t, out)); d != "" {
		t.Errorf("outputs after kill -9 and resume differ from an uninterrupted run:\n%s", d)
	}
}

// journalAnswers reads the (seq, beam) of every teacher answer a journal
// holds (a kill may have torn the last line).
func journalAnswers(t *testing.T, path string) [][2]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]int
	for _, l := range strings.Split(string(b), "\n") {
		var j struct {
			Seq    int             `json:"seq"`
			Beam   int             `json:"beam"`
			Answer json.RawMessage `json:"answer"`
		}
		if json.Unmarshal([]byte(l), &j) == nil && len(j.Answer) > 0 {
			out = append(out, [2]int{j.Seq, j.Beam})
		}
	}
	return out
}

func unionKeys(ms ...map[string]int) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			out[k] = true
		}
	}
	return out
}

// TestReadmeSampleQuickstart runs the data page's rejection sampling commands
// as written, with the endpoints pointed at the fake teacher and judge and
// trajs.jsonl made from the bundled recordings.
func TestReadmeSampleQuickstart(t *testing.T) {
	readme, err := os.ReadFile("../../docs/data.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- sample-quickstart -->\n```sh\n")
	if !ok {
		t.Fatal("docs/data.md has no rejection sampling block")
	}
	block, _, _ = strings.Cut(block, "```")
	dir := t.TempDir()
	expandRecordings(t, dir)
	sb := &sampleBackend{counts: map[string]int{}, judge: "gpt-5.4"}
	srv := fakellm.New(sb.handle)
	defer srv.Close()
	paths := map[string]string{
		"trajs.jsonl":              filepath.Join(dir, "trajectories.jsonl"),
		"sft_samples.jsonl":        filepath.Join(dir, "readme_samples.jsonl"),
		"sampled":                  filepath.Join(dir, "sampled"),
		"http://localhost:8000/v1": srv.URL,
		"http://localhost:8001/v1": srv.URL,
	}
	n := 0
	for _, line := range strings.Split(strings.ReplaceAll(strings.TrimSpace(block), "\\\n", " "), "\n") {
		args := strings.Fields(line)
		if len(args) < 3 || args[0] != "agentworld" {
			t.Fatalf("line %q is not an agentworld command", line)
		}
		args = args[1:]
		for i, a := range args {
			if p, ok := paths[a]; ok {
				args[i] = p
			}
		}
		if stdout, stderr, err := runBenchCLI(t, args...); err != nil {
			t.Fatalf("%s: %v\n%s\n%s", line, err, stdout, stderr)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d commands, want expand and sample", n)
	}
	for _, f := range []string{rejection.SFTFile, rejection.CandidatesFile, rejection.PairsFile, rejection.SummaryFile} {
		if st, err := os.Stat(filepath.Join(dir, "sampled", f)); err != nil || st.Size() == 0 {
			t.Errorf("the README commands wrote no %s: %v", f, err)
		}
	}
}
