package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"

	"github.com/agentworld/agentworld/examples"
	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/world"
)

func loadTrajectories(t *testing.T, path string) []*trajectory.Trajectory {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*trajectory.Trajectory
	for i, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		tr, errs := DecodeTrajectory(l, path, i+1)
		if len(errs) > 0 {
			t.Fatal(errs[0])
		}
		out = append(out, tr)
	}
	return out
}

func samplesOf(t *testing.T, b []byte) []Sample {
	t.Helper()
	var out []Sample
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var s Sample
		if err := json.Unmarshal(l, &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestExpandCounts: sft emits the sum of turns; rl exactly one sample per
// trajectory; both are the same for 1 and 3 workers.
func TestExpandCounts(t *testing.T) {
	testkit.NoLeaks(t)
	trajs := loadTrajectories(t, "testdata/small.jsonl")
	turns := 0
	for _, tr := range trajs {
		turns += len(tr.Turns)
	}
	for _, tc := range []struct {
		mode   Mode
		policy Policy
		want   int
	}{{SFT, Uniform, turns}, {RL, Uniform, len(trajs)}, {RL, Weighted, len(trajs)}} {
		var outs []string
		for _, w := range []int{1, 3} {
			var out bytes.Buffer
			sum, err := Export(context.Background(), []string{"testdata/small.jsonl"}, &out,
				&ExpandOptions{Mode: tc.mode, Policy: tc.policy, Seed: 9}, &ExportOptions{KeepDuplicates: true}, &Options{Workers: w})
			if err != nil {
				t.Fatal(err)
			}
			ss := samplesOf(t, out.Bytes())
			if len(ss) != tc.want || sum.Written != int64(tc.want) {
				t.Fatalf("mode %d policy %d workers %d: %d samples, want %d", tc.mode, tc.policy, w, len(ss), tc.want)
			}
			if tc.mode == RL {
				seen := map[string]bool{}
				for _, s := range ss {
					if seen[s.TrajectoryID] {
						t.Fatalf("two rl samples for %s", s.TrajectoryID)
					}
					seen[s.TrajectoryID] = true
					if len(s.History) != s.Turn-1 {
						t.Fatalf("history %d for turn %d", len(s.History), s.Turn)
					}
				}
			}
			outs = append(outs, out.String())
		}
		if outs[0] != outs[1] {
			t.Errorf("mode %d: output depends on the worker count", tc.mode)
		}
	}
}

// TestExpandSFTShape checks sample k of a trajectory against its turns.
func TestExpandSFTShape(t *testing.T) {
	tr := &trajectory.Trajectory{ID: "x", Domain: "terminal", SystemPrompt: "sys",
		Turns: []trajectory.Turn{{Action: "ls", Observation: "a b c d e f g h i j"}, {Action: "cat a", Observation: "cat a"}}}
	e, err := NewExpander(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []*Sample
	if err := e.Expand(tr, func(s *Sample) error { got = append(got, s); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d samples", len(got))
	}
	s := got[1]
	want := []Message{{"system", "sys"}, {"user", conversation.UserMessage(1, "ls", "", "")}, {"assistant", "**Environment Observation:**\na b c d e f g h i j"}, {"user", conversation.UserMessage(2, "cat a", "", "")}}
	if d := cmp.Diff(want, s.Prompt()); d != "" {
		t.Error(d)
	}
	if got[0].Category != "retrieval" || got[0].Weight != 1 || s.Category != "echo" || s.Weight != 0.05 {
		t.Errorf("categories %s/%v %s/%v", got[0].Category, got[0].Weight, s.Category, s.Weight)
	}
	line := ChatLineOf(s)
	if n := len(line.Messages); n != 5 || *line.Messages[2].Loss || !*line.Messages[4].Loss || line.Messages[4].Content != "<predicted_observation>\ncat a\n</predicted_observation>" || line.LossWeight != 0.05 {
		t.Errorf("chat line %+v", line)
	}
}

// TestWeightedPolicyPrefersInformativeTurns: with one retrieval turn among
// echoes, the weighted policy picks it far more often than 1/T.
func TestWeightedPolicyPrefersInformativeTurns(t *testing.T) {
	e, err := NewExpander(&ExpandOptions{Mode: RL, Policy: Weighted, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	hits := 0
	const n = 400
	for i := 0; i < n; i++ {
		tr := &trajectory.Trajectory{ID: strings.Repeat("i", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)), Domain: "search", SystemPrompt: "s"}
		for k := 0; k < 5; k++ {
			tr.Turns = append(tr.Turns, trajectory.Turn{Action: "open page", Observation: "open page"})
		}
		tr.Turns[3] = trajectory.Turn{Action: "q", Observation: "one two three four five six seven eight nine ten"}
		_ = e.Expand(tr, func(s *Sample) error {
			if s.Turn == 4 {
				hits++
			}
			return nil
		})
	}
	// weights 1.0 vs 4 × 0.05 → P = 1/1.2 ≈ 0.83
	if p := float64(hits) / n; math.Abs(p-1/1.2) > 0.08 {
		t.Errorf("retrieval turn chosen %.2f of the time, want ≈0.83", p)
	}
}

// TestExportParquetReadsBack writes RL prompts as Parquet and reads them
// back with the expected columns and values.
func TestExportParquetReadsBack(t *testing.T) {
	testkit.NoLeaks(t)
	trajs := loadTrajectories(t, "testdata/small.jsonl")
	path := filepath.Join(t.TempDir(), "rl.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Export(context.Background(), []string{"testdata/small.jsonl"}, f, &ExpandOptions{Mode: RL, Seed: 5},
		&ExportOptions{Format: FormatVerl, RowGroup: 3}, &Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	rf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	st, _ := rf.Stat()
	pf, err := parquet.OpenFile(rf, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, fld := range pf.Schema().Fields() {
		cols = append(cols, fld.Name())
	}
	if d := cmp.Diff([]string{"data_source", "prompt", "ability", "reward_model", "extra_info"}, cols); d != "" {
		t.Errorf("columns (-want +got):\n%s", d)
	}
	rows, err := parquet.Read[RLRow](rf, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(trajs) || sum.Written != int64(len(trajs)) {
		t.Fatalf("%d rows for %d trajectories", len(rows), len(trajs))
	}
	for i, r := range rows {
		tr := trajs[i]
		k := int(r.ExtraInfo.Turn) - 1
		if r.ExtraInfo.Index != int64(i) || r.ExtraInfo.TrajectoryID != tr.ID || r.DataSource != "agentworld/"+tr.Domain ||
			r.RewardModel.GroundTruth != tr.Turns[k].Observation || r.RewardModel.Style != "model" || r.ExtraInfo.Split != "train" {
			t.Fatalf("row %d: %+v", i, r.ExtraInfo)
		}
		want := []Message{{"system", tr.SystemPrompt}}
		for j, h := range tr.Turns[:k] {
			want = append(want, Message{"user", conversation.UserMessage(j+1, h.Action, "", "")}, Message{"assistant", conversation.ObservationResponse(h.Observation)})
		}
		want = append(want, Message{"user", conversation.UserMessage(k+1, tr.Turns[k].Action, "", "")})
		if d := cmp.Diff(want, r.Prompt); d != "" {
			t.Fatalf("row %d prompt (-want +got):\n%s", i, d)
		}
	}
}

func TestExportDedup(t *testing.T) {
	data, _ := os.ReadFile("testdata/small.jsonl")
	path := filepath.Join(t.TempDir(), "twice.jsonl")
	os.WriteFile(path, append(append([]byte{}, data...), data...), 0o644)
	var out bytes.Buffer
	sum, err := Export(context.Background(), []string{path}, &out, nil, &ExportOptions{Format: FormatChat}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Duplicates == 0 || sum.Written+sum.Duplicates != 2*sum.Written {
		t.Fatalf("summary %+v", sum)
	}
	var line ChatLine
	first, _, _ := bytes.Cut(out.Bytes(), []byte("\n"))
	if err := json.Unmarshal(first, &line); err != nil || line.Messages[0].Role != "system" {
		t.Fatalf("chat line %s: %v", first, err)
	}
}

func TestMaskingConfig(t *testing.T) {
	cfg, err := LoadMaskingConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"empty", "echo", "ack", "retrieval", "context", "transform", "reply"}, cfg.Names()); d != "" {
		t.Fatal(d)
	}
	cases := []struct {
		st   Stats
		want string
	}{
		{Stats{ObsWords: 0, ActWords: 3}, "empty"},
		{Stats{OL: 0.9, Nov: 0.1, R: 1, ActWords: 5, ObsWords: 5}, "echo"},
		{Stats{OL: 0.1, Nov: 0.9, R: 0.1, ActWords: 100, ObsWords: 10}, "ack"},
		{Stats{OL: 1, Nov: 0.95, R: 30, ActWords: 2, ObsWords: 60}, "retrieval"},
		{Stats{OL: 0.8, Nov: 0.5, R: 6, ActWords: 10, ObsWords: 60}, "context"},
		{Stats{OL: 0.7, Nov: 0.6, Jac: 0.35, R: 1.5, ActWords: 10, ObsWords: 15}, "transform"},
		{Stats{OL: 0.6, Nov: 0.4, Jac: 0.4, R: 2.5, ActWords: 10, ObsWords: 25}, "transform"},
		{Stats{OL: 0.1, Nov: 0.9, Jac: 0.05, R: 1.5, ActWords: 10, ObsWords: 15}, "reply"},
	}
	for _, c := range cases {
		if got := cfg.Categories[cfg.Classify(&c.st)].Name; got != c.want {
			t.Errorf("%+v → %s, want %s", c.st, got, c.want)
		}
	}
	for _, bad := range []string{
		"categories: []",
		"categories: [{name: a, weight: 1, when: {r: {min: 1}}}]",
		"categories: [{name: a, weight: -1}]",
		"categories: [{name: a, weight: 1}, {name: a, weight: 1}]",
		"categories: [{name: a, weight: 1, when: {r: {min: 2, max: 1}}}, {name: b, weight: 1}]",
		"categories: [{name: a, weight: 1, when: {rr: {min: 2}}}, {name: b, weight: 1}]",
	} {
		if _, err := ParseMaskingConfig([]byte(bad), "bad.yaml"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestSamplesAreWhatTheSimulatorSends pins training samples to serving: for
// a trajectory of an example world, sample k's messages are the request
// `agentworld serve` sends a world model at turn k (system prompt, history
// and newest message, byte for byte), and the target is an answer the
// simulator reads back as the real observation.
func TestSamplesAreWhatTheSimulatorSends(t *testing.T) {
	specs, err := world.LoadFS(examples.FS, "worlds")
	if err != nil {
		t.Fatal(err)
	}
	spec := specs["python-terminal"]
	if spec == nil {
		t.Fatal("example world python-terminal missing")
	}
	c := sim.Components(spec)
	tr := &trajectory.Trajectory{ID: "x", Domain: string(spec.Domain), Components: &c, Turns: []trajectory.Turn{
		{Action: `[{"keystrokes":"ls\n","duration":1}]`, Observation: "README.md  src  tests"},
		{Action: `[{"keystrokes":"cat README.md\n","duration":1}]`, Observation: "# demo\n<b>bold</b>"},
		{Action: `[{"keystrokes":"pytest -q\n","duration":5}]`, Observation: "3 passed in 0.01s"},
	}}
	e, err := NewExpander(nil)
	if err != nil {
		t.Fatal(err)
	}
	var samples []*Sample
	if err := e.Expand(tr, func(s *Sample) error { samples = append(samples, s); return nil }); err != nil {
		t.Fatal(err)
	}
	system, err := sim.SystemPrompt(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		var hist []sim.HistoryTurn
		for i, h := range tr.Turns[:s.Turn-1] {
			hist = append(hist, sim.HistoryTurn{Message: conversation.UserMessage(i+1, h.Action, "", ""), Assistant: conversation.ObservationResponse(h.Observation)})
		}
		var want []Message
		for _, m := range sim.BuildMessages(system, hist, 0, conversation.UserMessage(s.Turn, s.Action, "", "")) {
			want = append(want, Message{Role: m.Role, Content: m.Content})
		}
		if diff := cmp.Diff(want, s.Prompt()); diff != "" {
			t.Errorf("turn %d: sample differs from the simulator's request (-sim +sample):\n%s", s.Turn, diff)
		}
		if got := conversation.ExtractPrediction(s.Target()); got != s.Observation {
			t.Errorf("turn %d: the simulator reads the target as %q, want %q", s.Turn, got, s.Observation)
		}
	}
}
