// Package journal is the one durable record of long jobs (bench runs and
// their cache, data sample, reward score, rollout, world generation, the
// library): JSONL files appended one whole line per write(2) ([Appender]),
// fsynced every [SyncInterval], and read back on resume by [Rows], which
// knows what a crash can leave behind. A job killed at any instant (kill -9
// included) loses nothing it finished; a power loss at most the last
// interval's rows and a torn last line, which the job computes again.
package journal

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"time"

	"github.com/agentworld/agentworld/internal/trajectory"
)

// SyncInterval is how often a job's journal is fsynced while it runs: the
// rows a power loss or kernel crash can take are at most this old. A kill
// of the process takes none (each row is written as soon as it is known).
const SyncInterval = time.Second

// Rows reads the journal at path row by row: decode turns a line into a T
// (nil means json.Unmarshal) and fn receives each decoded row with its line
// and the byte offset the line starts at. A missing file has no rows.
//
// A crash can leave one torn row, the last line without its newline:
// every row is written with its newline in one write, so such a line was
// never finished, even when it happens to decode. Rows drops it without an
// error and the job computes that row again; [Open] cuts it before the
// next append. A whole line that does not decode is an error naming
// path:line (a *trajectory.LineError): it is damage a crash does not
// cause, and skipping it would lose a row without a word. An error from fn
// stops the read and is returned as it is.
func Rows[T any](path string, decode func(line []byte, v *T) error, fn func(v *T, line []byte, off int64) error) error {
	f, err := openExisting(path, os.O_RDONLY)
	if f == nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if decode == nil {
		decode = func(line []byte, v *T) error { return json.Unmarshal(line, v) }
	}
	size := st.Size()
	lr := trajectory.NewLineReader(io.LimitReader(f, size), path, 0)
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		off := lr.Offset()
		if off+int64(len(line)) >= size {
			return nil // no newline after it: a torn last row
		}
		var v T
		if err := decode(line, &v); err != nil {
			return &trajectory.LineError{File: path, Line: n, Err: err}
		}
		if err := fn(&v, line, off); err != nil {
			return err
		}
	}
}

// openExisting opens path with flag; a missing file is (nil, nil), a
// journal with no rows yet.
func openExisting(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return f, err
}
