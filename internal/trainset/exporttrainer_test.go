package trainset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/masking"
)

// maskWeights runs `data mask` on a file and returns each turn's weight
// and category by "id#turn", the reference the exports must agree with.
func maskWeights(t *testing.T, path string) (map[string]float64, map[string]string) {
	t.Helper()
	var out bytes.Buffer
	if _, err := masking.Mask(context.Background(), []string{path}, &out, nil, nil); err != nil {
		t.Fatal(err)
	}
	ws, cats := map[string]float64{}, map[string]string{}
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var r masking.MaskRow
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s#%d", r.ID, r.Turn)
		ws[key], cats[key] = r.Weight, r.Category
	}
	return ws, cats
}

func exportLines(t *testing.T, files []string, xo *expand.ExpandOptions, eo *ExportOptions, workers int) ([][]byte, *datapipe.Summary) {
	t.Helper()
	var out bytes.Buffer
	sum, err := Export(context.Background(), files, &out, xo, eo, &datapipe.Options{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")), sum
}

// TestTrainerWeightsExact checks that the per-trajectory exports carry each
// turn's masking weight in the field the trainer reads (ms-swift:
// messages[].loss_scale; LLaMA-Factory v1: messages[].loss_weight) and
// rebuild the trajectory turn by turn; an echo turn must arrive as 0.05.
func TestTrainerWeightsExact(t *testing.T) {
	const path = "../datapipe/testdata/small.jsonl"
	want, cats := maskWeights(t, path)
	trajs, err := datapipe.ReadTrajectories(path)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]int{}
	for i, tr := range trajs {
		byID[tr.ID] = i
	}
	for _, tr := range []Trainer{TrainerSwift, TrainerLlamaFactory} {
		t.Run(tr.String(), func(t *testing.T) {
			lines, sum := exportLines(t, []string{path}, nil, &ExportOptions{Format: tr.Format()}, 2)
			if len(lines) != len(trajs) || sum.Written != int64(len(trajs)) {
				t.Fatalf("%d lines, summary %+v; want one per trajectory (%d)", len(lines), sum, len(trajs))
			}
			echoes := 0
			for _, l := range lines {
				var id string
				var msgs []expand.Message
				var weights []float64
				switch tr {
				case TrainerSwift:
					var sl SwiftLine
					if err := json.Unmarshal(l, &sl); err != nil {
						t.Fatal(err)
					}
					id = sl.ID
					for _, m := range sl.Messages {
						msgs = append(msgs, expand.Message{Role: m.Role, Content: m.Content})
						if m.Role != "assistant" {
							if m.LossScale != nil || m.Loss != nil {
								t.Fatalf("%s: a %s message carries a loss field", id, m.Role)
							}
							continue
						}
						if m.LossScale == nil {
							t.Fatalf("%s: assistant message without loss_scale", id)
						}
						if (m.Loss != nil && !*m.Loss) != (*m.LossScale == 0) {
							t.Fatalf("%s: loss %v with loss_scale %v", id, *m.Loss, *m.LossScale)
						}
						weights = append(weights, *m.LossScale)
					}
				case TrainerLlamaFactory:
					var ll LFLine
					if err := json.Unmarshal(l, &ll); err != nil {
						t.Fatal(err)
					}
					id = ll.ID
					for _, m := range ll.Messages {
						if len(m.Content) != 1 || m.Content[0].Type != "text" {
							t.Fatalf("%s: content %+v", id, m.Content)
						}
						msgs = append(msgs, expand.Message{Role: m.Role, Content: m.Content[0].Value})
						if m.Role == "assistant" {
							weights = append(weights, m.LossWeight)
						} else if m.LossWeight != 0 {
							t.Fatalf("%s: %s message with loss_weight %v", id, m.Role, m.LossWeight)
						}
					}
				}
				traj := trajs[byID[id]]
				if msgs[0].Role != "system" || msgs[0].Content != expand.AssembleSystemPrompt(traj) {
					t.Fatalf("%s: first message %+v", id, msgs[0])
				}
				var gotTurns, wantTurns []string
				for _, m := range msgs[1:] {
					gotTurns = append(gotTurns, m.Role+": "+m.Content)
				}
				for i, tu := range traj.Turns {
					wantTurns = append(wantTurns,
						"user: "+conversation.UserMessage(i+1, tu.Action, "", ""),
						"assistant: "+conversation.Answer(tu.Observation))
				}
				if d := cmp.Diff(wantTurns, gotTurns); d != "" {
					t.Fatalf("%s: turns differ (-want +got):\n%s", id, d)
				}
				for k, w := range weights {
					key := fmt.Sprintf("%s#%d", id, k+1)
					if w != want[key] {
						t.Fatalf("%s: weight %v, data mask says %v", key, w, want[key])
					}
					if cats[key] == "echo" {
						echoes++
						if w != 0.05 {
							t.Fatalf("%s: echo turn weight %v, want 0.05", key, w)
						}
					}
				}
			}
			if echoes == 0 {
				t.Fatal("the corpus has no echo turn; the test proves nothing")
			}
		})
	}
}

// replicate writes n copies of a trajectory file, each trajectory's id
// suffixed by its copy, so seeded draws differ between copies.
func replicate(t *testing.T, path string, n int) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for c := range n {
		for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			var m map[string]any
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatal(err)
			}
			m["id"] = fmt.Sprintf("%v-copy%d", m["id"], c)
			line, _ := json.Marshal(m)
			b.Write(append(line, '\n'))
		}
	}
	out := filepath.Join(t.TempDir(), "replicated.jsonl")
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTrainerWeightsSampled checks the approximation of the trainers that
// read no weight: each turn is written with probability equal to its
// weight, so across many trajectories the share of echo turns kept is
// 0.05 (within 5 standard deviations of a binomial), every weight-1 turn is
// kept exactly once, and the draws depend only on the seed.
func TestTrainerWeightsSampled(t *testing.T) {
	const copies = 30
	path := replicate(t, "../datapipe/testdata/small.jsonl", copies)
	_, cats := maskWeights(t, "../datapipe/testdata/small.jsonl")
	cfg, _ := masking.LoadMaskingConfig("")
	weight := map[string]float64{}
	for _, c := range cfg.Categories {
		weight[c.Name] = c.Weight
	}
	trials := map[string]int{}
	for _, c := range cats {
		trials[c] += copies
	}
	for _, tr := range []Trainer{TrainerTRL, TrainerLlamaFactoryV0} {
		t.Run(tr.String(), func(t *testing.T) {
			xo := &expand.ExpandOptions{Seed: 11}
			eo := &ExportOptions{Format: tr.Format(), KeepDuplicates: true}
			lines, _ := exportLines(t, []string{path}, xo, eo, 3)
			kept := map[string]int{}
			for _, l := range lines {
				var meta struct {
					Category   string  `json:"category"`
					LossWeight float64 `json:"loss_weight"`
					Prompt     []any   `json:"prompt"`
					Completion []any   `json:"completion"`
					Messages   []any   `json:"messages"`
				}
				if err := json.Unmarshal(l, &meta); err != nil {
					t.Fatal(err)
				}
				if tr == TrainerTRL && (len(meta.Prompt) == 0 || len(meta.Completion) != 1) {
					t.Fatalf("TRL line %s", l)
				}
				if tr == TrainerLlamaFactoryV0 && len(meta.Messages) == 0 {
					t.Fatalf("chat line %s", l)
				}
				kept[meta.Category]++
			}
			for cat, n := range trials {
				p := weight[cat]
				mean, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
				if p >= 1 && kept[cat] != n || p == 0 && kept[cat] != 0 || math.Abs(float64(kept[cat])-mean) > 5*sd {
					t.Errorf("%s (weight %v): kept %d of %d, want about %.1f ± %.1f", cat, p, kept[cat], n, mean, 5*sd)
				}
			}
			if trials["echo"] == 0 || kept["echo"] == 0 {
				t.Fatalf("echo: %d trials, %d kept", trials["echo"], kept["echo"])
			}
			small := []string{"../datapipe/testdata/small.jsonl"}
			one, _ := exportLines(t, small, xo, eo, 1)
			three, _ := exportLines(t, small, xo, eo, 3)
			if !bytes.Equal(bytes.Join(one, nil), bytes.Join(three, nil)) {
				t.Fatal("the same seed with another worker count drew other turns")
			}
			other, _ := exportLines(t, small, &expand.ExpandOptions{Seed: 12}, eo, 1)
			if bytes.Equal(bytes.Join(one, nil), bytes.Join(other, nil)) {
				t.Fatal("another seed drew the same turns")
			}
		})
	}
}

func TestSampledCopies(t *testing.T) {
	cases := []struct {
		w, u float64
		want int
	}{
		{0, 0, 0}, {math.NaN(), 0, 0}, {-1, 0, 0},
		{0.05, 0.04, 1}, {0.05, 0.05, 0}, {1, 0.999, 1}, {1, 0, 1},
		{2.5, 0.4, 3}, {2.5, 0.6, 2},
	}
	for _, c := range cases {
		if got := sampledCopies(c.w, c.u); got != c.want {
			t.Errorf("sampledCopies(%v, %v) = %d, want %d", c.w, c.u, got, c.want)
		}
	}
}

func TestParseTrainer(t *testing.T) {
	for i, n := range trainerNames {
		if tr, err := ParseTrainer(n); err != nil || tr != Trainer(i) || tr.String() != n {
			t.Errorf("ParseTrainer(%q) = %v, %v", n, tr, err)
		}
	}
	if tr, err := ParseTrainer(""); err != nil || tr != TrainerSwift {
		t.Errorf("default trainer %v, %v", tr, err)
	}
	if _, err := ParseTrainer("axolotl"); err == nil {
		t.Error("unknown trainer accepted")
	}
	if _, err := Export(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, &bytes.Buffer{}, &expand.ExpandOptions{Mode: expand.RL}, &ExportOptions{Format: FormatSwift}, nil); err == nil {
		t.Error("rl mode with a per-trajectory layout accepted")
	}
}
