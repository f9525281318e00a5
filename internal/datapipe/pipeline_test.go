package datapipe

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// TestSessionRepliesAndDirectories: a directory stands for its JSON and
// JSONL files; a whole session reply decodes as a trajectory, a page of a
// longer one is refused naming the page.
func TestSessionRepliesAndDirectories(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.json", "a.jsonl", "notes.txt", "sub/c.jsonl.gz"} {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ExpandInputs([]string{dir, "x.jsonl"})
	want := []string{filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.json"), filepath.Join(dir, "sub/c.jsonl.gz"), "x.jsonl"}
	if err != nil || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("ExpandInputs = %v, %v; want %v", got, err, want)
	}
	if _, err := ExpandInputs([]string{filepath.Join(dir, "sub2")}); err != nil {
		t.Fatalf("a missing path is left for opening to report: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	_ = os.Mkdir(empty, 0o755)
	if _, err := ExpandInputs([]string{empty}); err == nil || !strings.Contains(err.Error(), empty) {
		t.Fatalf("an empty directory: %v", err)
	}

	traj := `{"id":"s1","domain":"terminal","system_prompt":"s","turns":[{"action":"ls","observation":"a"},{"action":"pwd","observation":"/"}]`
	if tr, errs := DecodeTrajectory([]byte(traj+`,"page":{"from_turn":1,"turns":2,"total_turns":2}}`), "r.json", 1); len(errs) > 0 || len(tr.Turns) != 2 {
		t.Fatalf("a whole session reply: %v", errs)
	}
	_, errs := DecodeTrajectory([]byte(traj+`,"page":{"from_turn":1,"turns":2,"total_turns":5,"next_from_turn":3}}`), "r.json", 1)
	if len(errs) != 1 || errs[0].Field != "page" || !strings.Contains(errs[0].Error(), "turns 1 to 2 of 5") {
		t.Fatalf("a page of a session: %v", errs)
	}
	// ReadTrajectories (research's reader) takes a saved reply too.
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(traj+`,"page":{"from_turn":1,"turns":2,"total_turns":2}}`), "", "  "); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(dir, "reply.json")
	if err := os.WriteFile(saved, pretty.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if trs, err := ReadTrajectories(saved); err != nil || len(trs) != 1 || trs[0].ID != "s1" {
		t.Fatalf("ReadTrajectories of a saved reply: %v %v", trs, err)
	}
}
