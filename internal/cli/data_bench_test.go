package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/pytext"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// readRecordFiles reads every record of the given files.
func readRecordFiles(t *testing.T, paths ...string) []*trajectory.Record {
	t.Helper()
	var out []*trajectory.Record
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		rr := trajectory.NewRecordReader(f, p)
		for {
			rec, _, err := rr.Next()
			if err != nil {
				break
			}
			out = append(out, rec)
		}
		f.Close()
	}
	return out
}

// readRecordingTrajectories reads the unified trajectories of JSONL files.
func readRecordingTrajectories(t *testing.T, paths []string) []*trajectory.Trajectory {
	t.Helper()
	var out []*trajectory.Trajectory
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			tr := new(trajectory.Trajectory)
			if err := json.Unmarshal([]byte(l), tr); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			out = append(out, tr)
		}
	}
	return out
}

// TestConvertedTrajectoriesScoreInBench is the end-to-end check of
// `data convert --to bench`: the example recordings (plain unified
// trajectories over all seven domains) become records identical to what
// `realenv export` writes for them, and `bench run` with the copy baseline
// and the offline rules scorer evaluates every one of them: no
// invalid_record, every turn after the first scored, and the prediction
// extracted from the copy baseline is the previous observation.
func TestConvertedTrajectoriesScoreInBench(t *testing.T) {
	recordings, err := filepath.Glob("../../examples/recordings/*.jsonl")
	if err != nil || len(recordings) == 0 {
		t.Fatalf("example recordings missing: %v", err)
	}
	// Several recordings end with the agent's final action, which the
	// environment never answered: both paths drop it rather than make a
	// sample with an empty ground truth (trajectory.TrimUnanswered), so the
	// recordings go in as they are.
	dir := t.TempDir()
	trajs := filepath.Join(dir, "trajectories.jsonl")
	var in bytes.Buffer
	unanswered := 0
	for _, r := range readRecordingTrajectories(t, recordings) {
		if n := len(r.Turns); n > 0 && strings.TrimSpace(r.Turns[n-1].Observation) == "" {
			unanswered++
		}
		b, err := trajectory.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(append(b, '\n'))
	}
	if unanswered == 0 {
		t.Fatal("no recording ends unanswered; the test no longer covers that case")
	}
	if err := os.WriteFile(trajs, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "recordings_test.jsonl")
	if _, stderr, err := runData(t, "convert", "--to", "bench", "--progress=false", "--on-error", "fatal", "-o", data, trajs); err != nil {
		t.Fatalf("convert --to bench: %v\n%s", err, stderr)
	}
	converted := readRecordFiles(t, data)
	for _, rec := range converted {
		for i, resp := range rec.Response {
			if strings.TrimSpace(strings.TrimPrefix(resp, conversation.ObservationMarker)) == "" {
				t.Errorf("record %s: response %d is empty", rec.ID, i+1)
			}
		}
	}

	// The same trajectories through realenv export give the same records.
	exported := filepath.Join(dir, "export")
	if _, stderr, err := runBenchCLI(t, "realenv", "export", "--out", exported, trajs); err != nil {
		t.Fatalf("realenv export: %v\n%s", err, stderr)
	}
	exportFiles, _ := filepath.Glob(filepath.Join(exported, "*_test.jsonl"))
	byKey := func(recs []*trajectory.Record) map[string]string {
		m := map[string]string{}
		for _, r := range recs {
			var b bytes.Buffer
			if err := trajectory.WriteRecord(&b, r); err != nil {
				t.Fatal(err)
			}
			m[fmt.Sprintf("%s/%s/%d", r.Task, r.ID, r.TurnIdx)] = b.String()
		}
		return m
	}
	if d := cmp.Diff(byKey(readRecordFiles(t, exportFiles...)), byKey(converted)); d != "" {
		t.Errorf("convert --to bench and realenv export disagree (-export +convert):\n%s", d)
	}
	domains := map[string]bool{}
	for _, r := range converted {
		domains[r.Task] = true
		if !strings.HasPrefix(r.Prompt[r.TurnIdx-1], fmt.Sprintf("### Turn %d\n**Action:**\n", r.TurnIdx)) ||
			!strings.HasPrefix(r.GroundTruth(), "**Environment Observation:**\n") {
			t.Errorf("record %s turn %d is not in the published format", r.ID, r.TurnIdx)
		}
		// The rules scorer strips the marker from both sides: the truth
		// itself scores 5 everywhere.
		if s, _ := judge.Rules(r, r.GroundTruth()); s != (bench.Scores{Format: 5, Factuality: 5, Consistency: 5, Realism: 5, Quality: 5}) {
			t.Errorf("record %s turn %d: the ground truth as prediction scores %+v", r.ID, r.TurnIdx, s)
		}
	}
	if len(domains) != 7 {
		t.Fatalf("converted records cover %d domains, want 7: %v", len(domains), domains)
	}

	run := filepath.Join(dir, "run")
	stdout, stderr, err := runBenchCLI(t, "bench", "run", "--data", data, "--model-url", bench.CopyBaselineURL, "--judge", "rules", "--out", run)
	if err != nil {
		t.Fatalf("bench run: %v\n%s\n%s", err, stdout, stderr)
	}
	recs := map[string]*trajectory.Record{}
	for _, r := range converted {
		recs[fmt.Sprintf("%s/%s/%d", r.Task, r.ID, r.TurnIdx)] = r
	}
	f, err := os.Open(filepath.Join(run, bench.JudgedFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var scored, firstTurns int
	var failures []string
	for sc.Scan() {
		var j bench.Judged
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			t.Fatal(err)
		}
		rec := recs[fmt.Sprintf("%s/%s/%d", j.Task, j.ID, j.TurnIdx)]
		switch {
		case rec == nil:
			t.Errorf("judged row %s/%s/%d matches no converted record", j.Task, j.ID, j.TurnIdx)
		case j.TurnIdx == 1:
			// On a first turn the copy baseline copies the initial state
			// (or says it has nothing to copy): a scored prediction, never
			// a model fault.
			firstTurns++
			if !j.Valid() || j.Prediction.Prediction == "" {
				failures = append(failures, fmt.Sprintf("%s turn 1: failure %q prediction %q, want a scored prediction", j.ID, j.Failure, j.Prediction.Prediction))
			}
		case !j.Valid():
			failures = append(failures, fmt.Sprintf("%s turn %d: %s %s", j.ID, j.TurnIdx, j.Failure, j.Error))
		default:
			scored++
			if want := pytext.Strip(rec.Response[j.TurnIdx-2]); j.Prediction.Prediction != want {
				t.Errorf("%s turn %d: extracted prediction %q, want the previous observation %q", j.ID, j.TurnIdx, j.Prediction.Prediction, want)
			}
			if j.Judge != judge.RulesJudge || j.Total < 1 {
				t.Errorf("%s turn %d: judge %q total %v", j.ID, j.TurnIdx, j.Judge, j.Total)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(failures)
	if len(failures) > 0 {
		t.Errorf("unexpected failures:\n%s", strings.Join(failures, "\n"))
	}
	if scored+firstTurns != len(converted) || scored != len(converted)-firstTurns || scored == 0 {
		t.Errorf("%d scored + %d first turns of %d records", scored, firstTurns, len(converted))
	}

	// bench score computes the domain scores from those rows.
	stdout, _, err = runBenchCLI(t, "bench", "score", "--judged", filepath.Join(run, bench.JudgedFile), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Domains map[string]struct {
			Valid int      `json:"valid"`
			Total *float64 `json:"total"`
		} `json:"domains"`
		Failures map[string]map[string]int `json:"failures"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("score --json: %v\n%s", err, stdout)
	}
	valid := 0
	for d, s := range rep.Domains {
		valid += s.Valid
		if s.Valid > 0 && s.Total == nil {
			t.Errorf("domain %s: %d valid samples but no total", d, s.Valid)
		}
	}
	for d, f := range rep.Failures {
		if f[bench.FailInvalidRecord] > 0 {
			t.Errorf("domain %s: %d invalid_record failures", d, f[bench.FailInvalidRecord])
		}
	}
	if valid != scored+firstTurns {
		t.Errorf("score counts %d valid samples, judged rows have %d", valid, scored+firstTurns)
	}
}
