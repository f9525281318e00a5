package journal

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/trajectory"
)

type row struct {
	N int `json:"n"`
}

// TestRowsAfterACrash reads what a crash can leave: the rows a job
// finished, never a torn last line (one without its newline, even if it
// decodes), and an error naming the line for any whole line that does not
// decode.
func TestRowsAfterACrash(t *testing.T) {
	tests := []struct {
		name, in string
		want     []int
		errLine  int // 0: no error
	}{
		{"whole rows", "{\"n\":1}\n{\"n\":2}\n", []int{1, 2}, 0},
		{"unfinished last line that decodes", "{\"n\":1}\n{\"n\":2}", []int{1}, 0},
		{"unfinished last line", "{\"n\":1}\n{\"n\":", []int{1}, 0},
		{"whole last line that does not decode", "{\"n\":1}\n\x00\x00\n", nil, 2},
		{"damaged line before the last", "{\"n\":1}\n{\"n\n{\"n\":3}\n", nil, 2},
		{"blank lines", "\n{\"n\":1}\n\n", []int{1}, 0},
		{"empty", "", nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.jsonl")
			if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			var got []int
			err := Rows(path, nil, func(r *row, line []byte, off int64) error {
				if string(line) != tc.in[off:off+int64(len(line))] {
					t.Errorf("offset %d does not start line %q", off, line)
				}
				got = append(got, r.N)
				return nil
			})
			var le *trajectory.LineError
			switch {
			case tc.errLine == 0 && err != nil:
				t.Fatal(err)
			case tc.errLine != 0 && (!errors.As(err, &le) || le.Line != tc.errLine || le.File != path):
				t.Fatalf("error %v, want one naming line %d of %s", err, tc.errLine, path)
			case tc.errLine == 0:
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("rows (-want +got):\n%s", d)
				}
			}
		})
	}
}

// TestRowsMissingAndCallbackErrors: a missing journal has no rows; the
// decoder decides what a row is; an error of the callback stops the read
// as it is, even on the last row.
func TestRowsMissingAndCallbackErrors(t *testing.T) {
	dir := t.TempDir()
	if err := Rows(filepath.Join(dir, "none.jsonl"), nil, func(*row, []byte, int64) error { t.Fatal("a row of a missing file"); return nil }); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "j.jsonl")
	if err := os.WriteFile(path, []byte("{\"n\":1}\n{\"n\":0}\n{\"n\":3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	positive := func(b []byte, r *row) error {
		if err := json.Unmarshal(b, r); err != nil || r.N <= 0 {
			return errors.New("want n > 0")
		}
		return nil
	}
	var le *trajectory.LineError
	if err := Rows(path, positive, func(*row, []byte, int64) error { return nil }); !errors.As(err, &le) || le.Line != 2 {
		t.Errorf("a row the decoder refuses: %v, want an error at line 2", err)
	}
	stop := errors.New("disk full")
	if err := Rows(path, nil, func(r *row, _ []byte, _ int64) error {
		if r.N == 3 {
			return stop
		}
		return nil
	}); err != stop {
		t.Errorf("callback error on the last row: %v, want it as it is", err)
	}
}
