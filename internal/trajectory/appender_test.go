package trajectory

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAppenderResumesAfterATornLine appends rows, tears the last line as a
// power loss would, and reopens: the torn line is cut and new rows start on
// a line of their own.
func TestAppenderResumesAfterATornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "rows.jsonl")
	a, err := OpenAppender(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(map[string]int{"n": 1}, map[string]int{"n": 2}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"n": 3, "to`) // torn: no newline
	f.Close()
	a, err = OpenAppender(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(map[string]int{"n": 4}); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("{\"n\":1}\n{\"n\":2}\n{\"n\":4}\n", string(got)); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if err := a.Append(map[string]int{"n": 5}); err == nil {
		t.Error("append after Close succeeded")
	}
}
