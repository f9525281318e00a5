package trainset

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/testkit"
)

// TestExportParquetReadsBack writes RL prompts as Parquet and reads them
// back with the expected columns and values.
func TestExportParquetReadsBack(t *testing.T) {
	testkit.NoLeaks(t)
	trajs, err := datapipe.ReadTrajectories("../datapipe/testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rl.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Export(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, f, &expand.ExpandOptions{Mode: expand.RL, Seed: 5},
		&ExportOptions{Format: FormatVerl, RowGroup: 3}, &datapipe.Options{Workers: 2})
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
		want := []expand.Message{{Role: "system", Content: tr.SystemPrompt}}
		for j, h := range tr.Turns[:k] {
			want = append(want, expand.Message{Role: "user", Content: conversation.UserMessage(j+1, h.Action, "", "")}, expand.Message{Role: "assistant", Content: conversation.ObservationResponse(h.Observation)})
		}
		want = append(want, expand.Message{Role: "user", Content: conversation.UserMessage(k+1, tr.Turns[k].Action, "", "")})
		if d := cmp.Diff(want, r.Prompt); d != "" {
			t.Fatalf("row %d prompt (-want +got):\n%s", i, d)
		}
	}
}

func TestExportDedup(t *testing.T) {
	data, _ := os.ReadFile("../datapipe/testdata/small.jsonl")
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
