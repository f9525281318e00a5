package datastats

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/testkit"
)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), got)
}

func TestStatsTableJSONPlot(t *testing.T) {
	testkit.NoLeaks(t)
	st, sum, err := CollectStats(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, nil, &datapipe.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, d := range st.Domains {
		n += d.Trajectories
	}
	if n != sum.Records || st.All.Trajectories != n {
		t.Fatalf("trajectories %d vs %d", n, sum.Records)
	}
	var table bytes.Buffer
	if err := st.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	golden(t, "stats_small.txt", table.Bytes())
	js, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var back CorpusStats
	if err := json.Unmarshal(js, &back); err != nil || back.All.OL.N != st.All.OL.N {
		t.Fatalf("json round trip: %v", err)
	}
	for _, f := range []string{"png", "svg"} {
		var img bytes.Buffer
		if err := st.WritePlot(&img, f); err != nil {
			t.Fatal(err)
		}
		magic := map[string]string{"png": "\x89PNG", "svg": "<?xml"}[f]
		if !bytes.HasPrefix(img.Bytes(), []byte(magic)) || img.Len() < 5000 {
			t.Errorf("%s plot: %d bytes starting %q", f, img.Len(), img.Bytes()[:min(8, img.Len())])
		}
	}
}
