package rejection

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// countingTeacher counts the requests that reach instantTeacher.
type countingTeacher struct {
	instantTeacher
	n atomic.Int64
}

func (t *countingTeacher) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	t.n.Add(1)
	return t.instantTeacher.Complete(ctx, req)
}

// TestRunResumesFromEveryFlush samples histories long enough that the
// finished samples are written in several flushes of about flushBytes,
// each with its checkpoint, then resumes from each checkpoint in turn (the
// state a kill right after it leaves, output files longer than it counts
// included): every resumed run ends with the bytes of the uninterrupted
// one and asks the teacher only for the beams it had not journaled.
func TestRunResumesFromEveryFlush(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	const samples, beams = 40, 2
	writeSamples(t, in, samples, 0, 64<<10)
	run := func(out string) (*Result, *countingTeacher) {
		t.Helper()
		sc, err := reward.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		teacher := &countingTeacher{}
		res, err := Run(context.Background(), []string{in}, out, &Options{Teacher: teacher, TeacherModel: "teacher", Scorer: sc, Beams: beams, Concurrency: 8})
		if err != nil {
			t.Fatal(err)
		}
		return res, teacher
	}
	ref := filepath.Join(dir, "ref")
	if _, teacher := run(ref); teacher.n.Load() != samples*beams {
		t.Fatalf("%d teacher requests, want %d", teacher.n.Load(), samples*beams)
	}
	files := []string{CandidatesFile, SFTFile, PairsFile, SummaryFile}
	want := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(ref, f))
		if err != nil {
			t.Fatal(err)
		}
		want[f] = b
	}
	if sft := len(want[SFTFile]); sft < 2*flushBytes {
		t.Fatalf("the SFT file is %d bytes, too little for the test to flush more than once", sft)
	}
	progress, err := os.ReadFile(filepath.Join(ref, ProgressFile))
	if err != nil {
		t.Fatal(err)
	}
	checkpoints := bytes.SplitAfter(progress, []byte("\n"))
	checkpoints = checkpoints[:len(checkpoints)-1]
	if len(checkpoints) < 3 {
		t.Fatalf("%d checkpoints, want the outputs written in several flushes", len(checkpoints))
	}
	for k := 1; k < len(checkpoints); k++ {
		out := filepath.Join(dir, "resumed", string(rune('a'+k)))
		if err := os.CopyFS(out, os.DirFS(ref)); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(out, SummaryFile)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, ProgressFile), bytes.Join(checkpoints[:k], nil), 0o644); err != nil {
			t.Fatal(err)
		}
		res, teacher := run(out)
		if teacher.n.Load() != 0 || res.Resumed == 0 || res.Resumed == samples {
			t.Errorf("checkpoint %d: %d samples resumed, %d teacher requests; want some resumed and none requested (every answer is journaled)", k, res.Resumed, teacher.n.Load())
		}
		for _, f := range files {
			got, err := os.ReadFile(filepath.Join(out, f))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want[f]) {
				t.Errorf("checkpoint %d: %s differs from the uninterrupted run's (%d bytes, want %d)", k, f, len(got), len(want[f]))
			}
		}
	}
}

// TestRunProgressTotal: the input is counted beside the sampling, so the
// progress line says "?" for the total until the count is in, and a
// finished run's last line has it.
func TestRunProgressTotal(t *testing.T) {
	p := newProgress(0)
	if l := p.line(); !strings.Contains(l, " 0/? samples") {
		t.Errorf("before the count: %q, want 0/? samples", l)
	}
	p.setTotal(7)
	if l := p.line(); !strings.Contains(l, " 0/7 samples") {
		t.Errorf("after the count: %q, want 0/7 samples", l)
	}

	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeSamples(t, in, 30, 0, 64)
	sc, err := reward.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Run(context.Background(), []string{in}, filepath.Join(dir, "out"), &Options{Teacher: instantTeacher{}, TeacherModel: "teacher", Scorer: sc,
		Progress: &buf, ProgressInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "sample: 30/30 samples (0 resumed)") {
		t.Errorf("last progress line %q, want 30/30 samples", buf.String())
	}
}
