package trajectory

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type readLine struct {
	Text string
	N    int
	Off  int64
	Err  string
}

func readAll(data string, maxLine int) []readLine {
	lr := NewLineReader(strings.NewReader(data), "f.jsonl", maxLine)
	var out []readLine
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			out = append(out, readLine{N: n, Err: err.Error()})
			continue
		}
		out = append(out, readLine{Text: string(line), N: n, Off: lr.Offset()})
	}
}

func TestLineReader(t *testing.T) {
	big := strings.Repeat("x", 3<<20) // three times the reader's buffer
	tests := []struct {
		name    string
		data    string
		maxLine int
		want    []readLine
	}{
		{"plain", "a\nbb\n", 0, []readLine{{"a", 1, 0, ""}, {"bb", 2, 2, ""}}},
		{"blank lines skipped, numbers kept", "\n  \na\n\r\n\tb\n", 0, []readLine{{"a", 3, 4, ""}, {"\tb", 5, 8, ""}}},
		{"crlf dropped, inner bytes kept", " a\r\nb \r\n", 0, []readLine{{" a", 1, 0, ""}, {"b ", 2, 4, ""}}},
		{"no final newline", "a\nlast", 0, []readLine{{"a", 1, 0, ""}, {"last", 2, 2, ""}}},
		{"trailing blank without newline", "a\n  ", 0, []readLine{{"a", 1, 0, ""}}},
		{"lines past the buffer", "s\n" + big + "\nt\n" + big, 0, []readLine{
			{"s", 1, 0, ""}, {big, 2, 2, ""}, {"t", 3, 3 + 3<<20, ""}, {big, 4, 5 + 3<<20, ""},
		}},
		{"too long, then on", "ok\n" + big + "\nafter\n", 1 << 20, []readLine{
			{"ok", 1, 0, ""}, {N: 2, Err: "f.jsonl:2: line too long (limit 1048576 bytes)"}, {"after", 3, 4 + 3<<20, ""},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := readAll(tc.data, tc.maxLine)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				if len(diff) > 2000 {
					diff = diff[:2000]
				}
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzLineReader: every line read is the exact bytes at its offset, minus
// the line end, and offsets and numbers only grow.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\n\n b\r\nc"), 4)
	f.Add([]byte("\r\r\n\n\nxyz\n"), 0)
	f.Add([]byte("long line here\nx\n"), 3)
	f.Fuzz(func(t *testing.T, data []byte, maxLine int) {
		maxLine = max(maxLine%64, 0)
		lr := NewLineReader(bytes.NewReader(data), "f", maxLine)
		lastOff, lastN := int64(-1), 0
		for range len(data) + 2 {
			line, n, err := lr.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if n <= lastN {
				t.Fatalf("line number %d after %d", n, lastN)
			}
			lastN = n
			if err != nil {
				if !errors.Is(err, ErrLineTooLong) {
					t.Fatal(err)
				}
				continue
			}
			off := lr.Offset()
			if off <= lastOff || off+int64(len(line)) > int64(len(data)) || !bytes.Equal(data[off:off+int64(len(line))], line) {
				t.Fatalf("line %d %q at offset %d does not match the input", n, line, off)
			}
			lastOff = off
		}
		t.Fatal("reader did not reach EOF")
	})
}

func TestRecordReaderRawAndMaxErrors(t *testing.T) {
	data := " {\"task\":\"a/mcp\",\"id\":1} \r\n{bad\n{bad\n{bad\n{\"task\":\"b\",\"id\":2}"
	rr := NewRecordReader(strings.NewReader(data), "f.jsonl")
	rr.SkipBad, rr.MaxErrors = true, 2
	var raws []string
	for {
		_, _, err := rr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, string(rr.Raw()))
	}
	if diff := cmp.Diff([]string{` {"task":"a/mcp","id":1} `, `{"task":"b","id":2}`}, raws); diff != "" {
		t.Errorf("raw lines (-want +got):\n%s", diff)
	}
	if rr.Skipped != 3 || len(rr.Errors) != 2 || !strings.HasPrefix(rr.Errors[1].Error(), "f.jsonl:3:") {
		t.Errorf("skipped %d, errors %v", rr.Skipped, rr.Errors)
	}
}
