package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAppenderResumesAfterATornLine appends rows, tears the last line as a
// power loss would, and reopens: the torn line is cut and new rows start on
// a line of their own.
func TestAppenderResumesAfterATornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "rows.jsonl")
	a, err := Open(path, 0)
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
	a, err = Open(path, 1)
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

func TestCutTornTail(t *testing.T) {
	long := strings.Repeat("x", 70<<10) // longer than one backwards block
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"whole lines", "{}\n{}\n", "{}\n{}\n"},
		{"torn last line", "{}\n{\"a\":", "{}\n"},
		{"only a torn line", "{\"a\":", ""},
		{"torn line longer than a block", "{}\n" + long, "{}\n"},
		{"whole line longer than a block, then a torn one", long + "\n{", long + "\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.jsonl")
			if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := CutTornTail(path); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("after the cut: %d bytes ending %q, want %d bytes", len(got), got[max(len(got)-8, 0):], len(tc.want))
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "none.jsonl")
	if err := CutTornTail(missing); err != nil {
		t.Errorf("missing file: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file was created: %v", err)
	}
}
