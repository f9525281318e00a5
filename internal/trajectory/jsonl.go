package trajectory

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// DefaultMaxLine bounds one JSONL line. Real AgentWorldBench rows average
// ~185 KB and reach several MB; the bound only stops a runaway file.
const DefaultMaxLine = 256 << 20

// ErrLineTooLong reports a line longer than the reader's limit.
var ErrLineTooLong = errors.New("line too long")

// LineError locates a bad line so a user can open the file at it.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// LineReader yields the lines of a JSONL stream one at a time, whatever their
// length, skipping blank lines and counting line numbers for errors.
type LineReader struct {
	r       *bufio.Reader
	name    string
	line    int
	maxLine int
	// read counts the bytes consumed; start is where the line last returned
	// begins.
	read, start int64
}

// NewLineReader reads r; name is used in errors. maxLine <= 0 means
// DefaultMaxLine.
func NewLineReader(r io.Reader, name string, maxLine int) *LineReader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &LineReader{r: bufio.NewReaderSize(r, 1<<20), name: name, maxLine: maxLine}
}

// Next returns the next non-blank line and its 1-based number, or io.EOF.
// The line is returned byte for byte without its "\n" or "\r\n"; the slice
// is only valid until the next call. A line over the limit is a *LineError
// wrapping ErrLineTooLong, after which reading goes on at the next line.
func (lr *LineReader) Next() ([]byte, int, error) {
	var buf []byte
	start := lr.read
	for {
		frag, err := lr.r.ReadSlice('\n')
		lr.read += int64(len(frag))
		if len(buf)+len(frag) > lr.maxLine {
			lr.line++
			// drain the rest of the line
			for errors.Is(err, bufio.ErrBufferFull) {
				frag, err = lr.r.ReadSlice('\n')
				lr.read += int64(len(frag))
			}
			return nil, lr.line, &LineError{File: lr.name, Line: lr.line, Err: fmt.Errorf("%w (limit %d bytes)", ErrLineTooLong, lr.maxLine)}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			buf = append(buf, frag...)
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, lr.line, &LineError{File: lr.name, Line: lr.line + 1, Err: err}
		}
		if buf != nil {
			buf = append(buf, frag...)
		} else {
			buf = frag
		}
		if len(buf) == 0 && errors.Is(err, io.EOF) {
			return nil, lr.line, io.EOF
		}
		lr.line++
		line := bytes.TrimRight(buf, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			if errors.Is(err, io.EOF) {
				return nil, lr.line, io.EOF
			}
			buf = buf[:0:0]
			start = lr.read
			continue
		}
		lr.start = start
		return line, lr.line, nil
	}
}

// Offset is the byte offset in the stream where the line last returned
// begins, so a caller can index a file's lines and read them back later
// with ReadAt instead of holding them.
func (lr *LineReader) Offset() int64 { return lr.start }

// Line is the number of the line last returned.
func (lr *LineReader) Line() int { return lr.line }

// RecordReader decodes AgentWorldBench records from a JSONL stream.
type RecordReader struct {
	lr *LineReader
	// SkipBad makes Next skip malformed lines instead of failing; Skipped
	// counts them and Errors keeps each one (the first MaxErrors of them
	// when MaxErrors > 0, so a long bad file does not pile up in memory).
	SkipBad   bool
	Skipped   int
	Errors    []error
	MaxErrors int
	raw       []byte
}

// NewRecordReader reads records from r; name is used in errors.
func NewRecordReader(r io.Reader, name string) *RecordReader {
	return &RecordReader{lr: NewLineReader(r, name, 0)}
}

// Next returns the next record and its line number, or io.EOF. A malformed
// line is a *LineError unless SkipBad is set.
func (rr *RecordReader) Next() (*Record, int, error) {
	for {
		line, n, err := rr.lr.Next()
		if err != nil {
			var le *LineError
			if rr.SkipBad && errors.As(err, &le) && errors.Is(err, ErrLineTooLong) {
				rr.skip(err)
				continue
			}
			return nil, n, err
		}
		rec := new(Record)
		// Called directly: json.Unmarshal would first scan the whole line
		// to validate it, and the record's own decoder validates it again.
		if err := rec.UnmarshalJSON(line); err != nil {
			le := &LineError{File: rr.lr.name, Line: n, Err: err}
			if rr.SkipBad {
				rr.skip(le)
				continue
			}
			return nil, n, le
		}
		rr.raw = line
		return rec, n, nil
	}
}

func (rr *RecordReader) skip(err error) {
	rr.Skipped++
	if rr.MaxErrors <= 0 || len(rr.Errors) < rr.MaxErrors {
		rr.Errors = append(rr.Errors, err)
	}
}

// Raw is the line of the record last returned, byte for byte (what a
// content hash of the row is taken over); valid until the next call.
func (rr *RecordReader) Raw() []byte { return rr.raw }

// DataFiles lists every *_test.jsonl file of an AgentWorldBench data dir,
// sorted by name. A path to a single file is returned as is.
func DataFiles(dir string) ([]string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{dir}, nil
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*_test.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(matches)
	if len(matches) == 0 {
		return nil, fmt.Errorf("%s: no *_test.jsonl files", dir)
	}
	return matches, nil
}

// ReadFile loads every record of one JSONL file. Use RecordReader to stream
// large files instead.
func ReadFile(path string, skipBad bool) ([]*Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rr := NewRecordReader(f, path)
	rr.SkipBad = skipBad
	var out []*Record
	for {
		rec, _, err := rr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

// WriteRecord appends one record as a JSONL line.
func WriteRecord(w io.Writer, r *Record) error {
	b, err := r.MarshalJSON()
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// DomainFromFile returns the domain a data file is named after
// ("terminal_test.jsonl" → "terminal").
func DomainFromFile(path string) string {
	return strings.TrimSuffix(filepath.Base(path), "_test.jsonl")
}
