package reward

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// slowJudge answers like verdictJudge after a delay, so a run can be killed
// in the middle.
type slowJudge struct{ d time.Duration }

func (j slowJudge) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	time.Sleep(j.d)
	return verdictJudge{}.Complete(ctx, req)
}

func writeItems(t *testing.T, path string, n int) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		it := item(fmt.Sprint(i%50), tag(fmt.Sprintf("%s\n%d", screen, i)), screen) // ids repeat on purpose
		line, _ := json.Marshal(it)
		b.Write(line)
		b.WriteByte('\n')
		if i == 7 {
			b.WriteString("{not json\n")
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readOut(t *testing.T, path string) map[int]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[int]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var sl ScoredLine
		if err := json.Unmarshal(sc.Bytes(), &sl); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		seen[sl.Line]++
	}
	return seen
}

// stallingJudge answers like slowJudge for its first limit calls, then
// never again: the run it judges cannot finish, however long the process
// that kills it is kept from running by a loaded machine.
type stallingJudge struct {
	slowJudge
	limit int64
	calls *atomic.Int64
}

func (j stallingJudge) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	if j.calls.Add(1) > j.limit {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return j.slowJudge.Complete(ctx, req)
}

// TestScoreFileChild is the process TestScoreFileKill kills; it only runs
// when that test starts it. It judges at most 150 of the 300 items.
func TestScoreFileChild(t *testing.T) {
	dir := testkit.ChildEnv(t, "AGENTWORLD_REWARD_CHILD", "TestScoreFileKill")
	judge := stallingJudge{slowJudge: slowJudge{20 * time.Millisecond}, limit: 150, calls: &atomic.Int64{}}
	s, _ := New(&Options{Judge: judge, JudgeModel: "j", MaxConcurrency: 4})
	_, _ = ScoreFile(context.Background(), s, filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl"), &FileOptions{Workers: 4})
}

// TestScoreFileKill kills a scoring process with SIGKILL mid-run, tears
// the last output line on purpose, and resumes: every input line is
// answered exactly once.
func TestScoreFileKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	const n = 300
	writeItems(t, in, n)
	cmd := testkit.Child("TestScoreFileChild", "AGENTWORLD_REWARD_CHILD="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(out)
		if strings.Count(string(b), "\n") >= 40 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the child wrote too little in two minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	before := readOut(t, out)
	if len(before) >= n+1 {
		t.Fatalf("the child finished before the kill (%d lines)", len(before))
	}
	// A torn last line, as a kill mid-write leaves.
	f, _ := os.OpenFile(out, os.O_WRONLY|os.O_APPEND, 0)
	_, _ = f.WriteString(`{"line": 99999, "id": "to`)
	f.Close()

	s, _ := New(&Options{Judge: verdictJudge{}, JudgeModel: "j"})
	var prog bytes.Buffer
	sum, err := ScoreFile(context.Background(), s, in, out, &FileOptions{Progress: &prog})
	if err != nil {
		t.Fatal(err)
	}
	seen := readOut(t, out)
	if len(seen) != n+1 {
		t.Errorf("%d input lines answered, want %d", len(seen), n+1)
	}
	for line, c := range seen {
		if c != 1 || line < 1 || line > n+1 {
			t.Errorf("line %d answered %d times", line, c)
		}
	}
	if b, _ := os.ReadFile(out); !strings.Contains(string(b), `"reason":"invalid item: `+in+`:9: `) {
		t.Error("the malformed input line 9 is not answered with a reason naming it")
	}
	wantLast := fmt.Sprintf("reward score: %d/%d items (%d resumed)", n+1, n+1, len(before))
	if lines := strings.Split(strings.TrimSpace(prog.String()), "\n"); sum.Resumed != len(before) || sum.Resumed+sum.Scored != n+1 || !strings.HasPrefix(lines[len(lines)-1], wantLast) {
		t.Errorf("summary %+v (before the kill: %d), progress %q, want the last line to start %q", sum, len(before), prog.String(), wantLast)
	}
}

func TestScoreFileBadOutput(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	writeItems(t, in, 3)
	if err := os.WriteFile(out, []byte("{\"x\": 1}\n{\"line\": 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := New(nil)
	if _, err := ScoreFile(context.Background(), s, in, out, nil); err == nil || !strings.Contains(err.Error(), "out.jsonl:1") {
		t.Errorf("error %v, want one naming out.jsonl:1", err)
	}
}

// jitterJudge answers like verdictJudge after a delay that varies from
// call to call, so calls finish out of the order they started in.
type jitterJudge struct{ n *atomic.Int64 }

func (j jitterJudge) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	time.Sleep(time.Duration((j.n.Add(7)*13)%5) * time.Millisecond)
	return verdictJudge{}.Complete(ctx, req)
}

// TestScoreFileWritesInInputOrder: with many workers finishing out of
// order, the output lines still follow the input's, and a resumed run
// continues in that order.
func TestScoreFileWritesInInputOrder(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	writeItems(t, in, 60)
	s, _ := New(&Options{Judge: jitterJudge{&atomic.Int64{}}, JudgeModel: "j", MaxConcurrency: 16})
	// A first run that stops early: an output holding lines 1-20.
	if _, err := ScoreFile(context.Background(), s, in, out, &FileOptions{Workers: 16}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(out, []byte(strings.Join(lines[:20], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ScoreFile(context.Background(), s, in, out, &FileOptions{Workers: 16}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	prev := 0
	for sc.Scan() {
		var sl ScoredLine
		if err := json.Unmarshal(sc.Bytes(), &sl); err != nil {
			t.Fatal(err)
		}
		if sl.Line != prev+1 {
			t.Fatalf("output line for input line %d after %d: not in input order", sl.Line, prev)
		}
		prev = sl.Line
	}
	if prev != 61 {
		t.Fatalf("output ends at input line %d, want 61", prev)
	}
}
