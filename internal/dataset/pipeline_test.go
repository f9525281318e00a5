package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/agentworld/agentworld/internal/testkit"
)

// TestBadInputReported checks each kind of bad line is reported with
// file:line and field, counted by reason, and skipped.
func TestBadInputReported(t *testing.T) {
	testkit.NoLeaks(t)
	var report bytes.Buffer
	for _, workers := range []int{1, 3} {
		report.Reset()
		sum, err := Validate(context.Background(), []string{"testdata/bad.jsonl"}, &report, &Options{Workers: workers, MaxLine: 256})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"testdata/bad.jsonl:2: turns[0].observation: turn has an action but no observation",
			"testdata/bad.jsonl:3: turns[0]: empty turn",
			"testdata/bad.jsonl:4: invalid UTF-8",
			`testdata/bad.jsonl:5: extra: bad JSON: json: unknown field "extra"`,
			"testdata/bad.jsonl:6: bad JSON: unexpected EOF",
			"testdata/bad.jsonl:8: line too long (limit 256 bytes)",
			"testdata/bad.jsonl:9: domain: missing field",
			"testdata/bad.jsonl:9: turns: missing field (empty trajectory)",
			"testdata/bad.jsonl:9: system_prompt: missing field: system_prompt or components",
		}
		got := strings.Split(strings.TrimSpace(report.String()), "\n")
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("workers=%d report (-want +got):\n%s", workers, d)
		}
		wantSum := map[string]int64{"missing-observation": 1, "empty-turn": 1, "invalid-utf8": 1, "bad-json": 2, "line-too-long": 1, "invalid": 1}
		if d := cmp.Diff(wantSum, sum.SkipReasons); d != "" {
			t.Errorf("skip reasons (-want +got):\n%s", d)
		}
		if sum.Records != 2 || sum.Skipped != 7 || sum.Lines != 9 {
			t.Errorf("summary %+v", sum)
		}
	}
}

func TestOnErrorFatalStops(t *testing.T) {
	testkit.NoLeaks(t)
	var out bytes.Buffer
	_, err := Mask(context.Background(), []string{"testdata/bad.jsonl"}, &out, nil, &Options{OnError: Fatal, Workers: 2})
	var re *RecordError
	if !errors.As(err, &re) || re.Line != 2 || !errors.Is(err, ErrMissingObservation) {
		t.Fatalf("err = %v, want the line-2 missing observation", err)
	}
	sum, err := Mask(context.Background(), []string{"testdata/bad.jsonl"}, &out, nil, &Options{OnError: Skip, MaxLine: 256})
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
	plain, err := os.ReadFile("testdata/small.jsonl")
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
	if _, err := Mask(context.Background(), []string{"testdata/small.jsonl"}, &want, nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{gzPath, zsPath} {
		var got bytes.Buffer
		if _, err := Mask(context.Background(), []string{p}, &got, nil, &Options{Workers: 2}); err != nil {
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
	data, err := os.ReadFile("testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var sc Scorer
	var rt rawTrajectory
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if !walkTrajectory(line, &rt) {
			t.Fatalf("line %d: fast path refused a plain line", i+1)
		}
		tr, errs := DecodeTrajectory(line, "small", i+1)
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
	data, _ := os.ReadFile("testdata/small.jsonl")
	for _, l := range bytes.Split(data, []byte("\n")) {
		f.Add(l)
	}
	bad, _ := os.ReadFile("testdata/bad.jsonl")
	for _, l := range bytes.Split(bad, []byte("\n")) {
		f.Add(l)
	}
	f.Add([]byte(`{"domain":"x","system_prompt":"s","turns":[{"action":"a","observation":"b","meta":{"k":[1,2.5e3,null,true]}}],"meta":null}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var rt rawTrajectory
		if !walkTrajectory(line, &rt) {
			return
		}
		tr, errs := DecodeTrajectory(line, "fuzz", 1)
		if len(errs) > 0 {
			t.Fatalf("walker accepted, decoder refused: %v", errs[0])
		}
		if len(tr.Turns) != len(rt.turns) {
			t.Fatalf("turns %d vs %d", len(tr.Turns), len(rt.turns))
		}
	})
}

// FuzzDocReader: any bytes give compact JSON documents or one bad-document
// error, never a panic or a hang.
func FuzzDocReader(f *testing.F) {
	f.Add([]byte("{\n \"a\": 1\n}\n{\"b\":[1,2]}\n"))
	f.Add([]byte("{\"id\": \n oops"))
	f.Add([]byte("  \n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := newDocReader(bytes.NewReader(data), "fuzz", 1<<20)
		if err != nil {
			return
		}
		for i := 0; i <= len(data); i++ {
			doc, _, err := d.Next()
			if err != nil {
				return
			}
			if !json.Valid(doc) || bytes.ContainsRune(doc, '\n') {
				t.Fatalf("document %q", doc)
			}
		}
		t.Fatal("reader did not end")
	})
}
