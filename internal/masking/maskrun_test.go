package masking

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/testkit"
)

func TestOnErrorFatalStops(t *testing.T) {
	testkit.NoLeaks(t)
	var out bytes.Buffer
	_, err := Mask(context.Background(), []string{"../datapipe/testdata/bad.jsonl"}, &out, nil, &datapipe.Options{OnError: datapipe.Fatal, Workers: 2})
	var re *datapipe.RecordError
	if !errors.As(err, &re) || re.Line != 2 || !errors.Is(err, datapipe.ErrMissingObservation) {
		t.Fatalf("err = %v, want the line-2 missing observation", err)
	}
	sum, err := Mask(context.Background(), []string{"../datapipe/testdata/bad.jsonl"}, &out, nil, &datapipe.Options{OnError: datapipe.Skip, MaxLine: 256})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != 2 || sum.Skipped != 7 || sum.Written != 3 {
		t.Fatalf("summary %+v", sum)
	}
}

// TestCompressedInput reads the same trajectories plain, gzip and zstd.
func TestCompressedInput(t *testing.T) {
	testkit.NoLeaks(t)
	plain, err := os.ReadFile("../datapipe/testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var gz, zs bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(plain)
	gw.Close()
	zw, _ := zstd.NewWriter(&zs)
	zw.Write(plain)
	zw.Close()
	gzPath, zsPath := filepath.Join(dir, "a.jsonl.gz"), filepath.Join(dir, "a.jsonl.zst")
	os.WriteFile(gzPath, gz.Bytes(), 0o644)
	os.WriteFile(zsPath, zs.Bytes(), 0o644)
	var want bytes.Buffer
	if _, err := Mask(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, &want, nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{gzPath, zsPath} {
		var got bytes.Buffer
		if _, err := Mask(context.Background(), []string{p}, &got, nil, &datapipe.Options{Workers: 2}); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: output differs from the plain file", p)
		}
	}
}

// TestMaskFastAndStrictPathsAgree runs every line through the fast walker
// and through the strict decoder.
func TestMaskFastAndStrictPathsAgree(t *testing.T) {
	data, err := os.ReadFile("../datapipe/testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var sc Scorer
	var rt rawTrajectory
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if !walkTrajectory(line, &rt) {
			t.Fatalf("line %d: fast path refused a plain line", i+1)
		}
		tr, errs := datapipe.DecodeTrajectory(line, "small", i+1)
		if len(errs) > 0 {
			t.Fatal(errs[0])
		}
		for k, tu := range tr.Turns {
			if a, b := sc.Score(tu.Action, tu.Observation), sc.ScoreJSON(rt.turns[k].action, rt.turns[k].observation); a != b {
				t.Fatalf("line %d turn %d: %+v vs %+v", i+1, k+1, a, b)
			}
		}
	}
}

// FuzzWalkTrajectory: whenever the fast walker accepts a line, the strict
// decoder must accept it too, with the same turns.
func FuzzWalkTrajectory(f *testing.F) {
	data, _ := os.ReadFile("../datapipe/testdata/small.jsonl")
	for _, l := range bytes.Split(data, []byte("\n")) {
		f.Add(l)
	}
	bad, _ := os.ReadFile("../datapipe/testdata/bad.jsonl")
	for _, l := range bytes.Split(bad, []byte("\n")) {
		f.Add(l)
	}
	f.Add([]byte(`{"domain":"x","system_prompt":"s","turns":[{"action":"a","observation":"b","meta":{"k":[1,2.5e3,null,true]}}],"meta":null}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var rt rawTrajectory
		if !walkTrajectory(line, &rt) {
			return
		}
		tr, errs := datapipe.DecodeTrajectory(line, "fuzz", 1)
		if len(errs) > 0 {
			t.Fatalf("walker accepted, decoder refused: %v", errs[0])
		}
		if len(tr.Turns) != len(rt.turns) {
			t.Fatalf("turns %d vs %d", len(tr.Turns), len(rt.turns))
		}
	})
}

// TestCPythonPeerAgrees runs the CPython peer of bench/ on the sample
// corpus and requires byte-identical output.
func TestCPythonPeerAgrees(t *testing.T) {
	py := testkit.LookPath(t, "python3", "install python3 (Debian: apt-get install python3)")
	cfg, _ := LoadMaskingConfig("")
	cfgJSON, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(t.TempDir(), "cfg.json")
	os.WriteFile(cfgPath, cfgJSON, 0o644)
	in, err := os.ReadFile("../datapipe/testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "../../perf/mask_peer.py", cfgPath)
	cmd.Stdin = bytes.NewReader(in)
	peer, err := cmd.Output()
	if err != nil {
		t.Fatalf("peer: %v", err)
	}
	var ours bytes.Buffer
	if _, err := Mask(context.Background(), []string{"../datapipe/testdata/small.jsonl"}, &ours, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if ours.Len() == 0 || !bytes.Equal(ours.Bytes(), peer) {
		t.Errorf("outputs differ:\n%s", cmp.Diff(string(peer), ours.String()))
	}
}
