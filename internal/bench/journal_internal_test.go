package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCompactKeepsExactBytes: compaction keeps each sample's last row byte
// for byte, whatever its length (here 2 MiB, past the reader's buffer),
// drops blank lines, CR line ends and a torn last line, and sorts by file
// and line.
func TestCompactKeepsExactBytes(t *testing.T) {
	big := fmt.Sprintf(`{"sample":"b","file":"x","line":1,"text":%q}`, strings.Repeat("é", 1<<20))
	rows := []string{
		`{"sample":"a","file":"x","line":2,"v":1}`,
		big,
		"",
		`{"sample":"a", "file":"x","line":2,"v":2}` + "\r",
		`  {"sample":"c","file":"w","line":9}  `,
	}
	path := filepath.Join(t.TempDir(), "j.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(rows, "\n")+"\n"+`{"sample":"d","fi`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := compact(path); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `  {"sample":"c","file":"w","line":9}  ` + "\n" + big + "\n" + `{"sample":"a", "file":"x","line":2,"v":2}` + "\n"
	if string(got) != want {
		t.Errorf("compacted journal (-want +got):\n%s", cmp.Diff(want, string(got)))
	}
}

func TestCompactRejectsCorruptMiddleLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	if err := os.WriteFile(path, []byte("{\"sample\":\"a\"}\n{torn\n{\"sample\":\"b\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := compact(path)
	if err == nil || !strings.Contains(err.Error(), path+":2:") {
		t.Fatalf("err = %v, want one naming %s:2", err, path)
	}
	if err := compact(filepath.Join(t.TempDir(), "missing.jsonl")); err != nil {
		t.Fatalf("missing journal: %v", err)
	}
}

// TestReadDataSkipBadCapsErrors: under --skip-bad every malformed line is
// counted, at most 100 are named, and good rows around them (one of 2 MiB)
// still come through with their line numbers.
func TestReadDataSkipBadCapsErrors(t *testing.T) {
	dir := t.TempDir()
	row := func(id int, text string) string {
		return fmt.Sprintf(`{"task":"a/mcp","id":%d,"prompt":["p"],"response":[%q],"turn_idx":1}`, id, text)
	}
	lines := []string{row(1, strings.Repeat("o", 2<<20))}
	for range 150 {
		lines = append(lines, "{bad")
	}
	lines = append(lines, row(2, "r"))
	if err := os.WriteFile(filepath.Join(dir, "mcp_test.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []int
	st, err := ReadData(dir, true, func(it *Item) error {
		got = append(got, it.Line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 152}, got); diff != "" {
		t.Errorf("rows' lines (-want +got):\n%s", diff)
	}
	if st.Skipped != 150 || len(st.SkippedErrors) != 100 || !strings.Contains(st.SkippedErrors[0], "mcp_test.jsonl:2:") {
		t.Errorf("skipped %d, %d errors, first %q", st.Skipped, len(st.SkippedErrors), st.SkippedErrors[0])
	}
	if _, err := ReadData(dir, false, func(*Item) error { return nil }); err == nil || !strings.Contains(err.Error(), "mcp_test.jsonl:2:") {
		t.Errorf("without skip-bad: %v", err)
	}
}
