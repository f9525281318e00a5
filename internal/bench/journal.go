package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// SyncInterval is how often a journal ([trajectory.Appender]) is fsynced
// while a run goes on.
//
// Durability policy: every row is one write(2) of one whole line, made as
// soon as the row is known, so a process killed at any instant (kill -9
// included) leaves only complete lines behind, and nothing already finished
// is lost. The file is fsynced at most every
// SyncInterval and when closed, so a power loss or kernel crash can lose at
// most the last interval's rows (and leave a torn last line, which the
// reader drops); resume recomputes them.
const SyncInterval = time.Second

// rowKey is what resume and compaction read of any row.
type rowKey struct {
	Sample  string `json:"sample"`
	File    string `json:"file"`
	Line    int    `json:"line"`
	Failure string `json:"failure"`
}

// retryable reports a row whose sample a rerun should compute again: the
// endpoint failed, which says nothing about the sample.
func (k rowKey) retryable() bool { return k.Failure == FailTransport }

// scanRows calls fn for every complete row of a JSONL file with its decoded
// key, its raw bytes (without the newline) and the offset they start at; a
// missing file has no rows. A line that does not decode is an error naming
// file:line, except the last line, which a power loss may have torn
// (trajectory.OpenAppender cuts it before appending) and which is ignored.
func scanRows(path string, fn func(k rowKey, raw []byte, off int64) error) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return scanReader(f, path, fn)
}

// scanReader is scanRows over an open file; name is used in errors.
func scanReader(r io.Reader, name string, fn func(k rowKey, raw []byte, off int64) error) error {
	lr := trajectory.NewLineReader(r, name, 0)
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var k rowKey
		if err := json.Unmarshal(line, &k); err != nil || k.Sample == "" {
			if lastLine(lr) {
				return nil
			}
			if err == nil {
				err = errors.New("row without a sample key")
			}
			return &trajectory.LineError{File: name, Line: n, Err: err}
		}
		if err := fn(k, line, lr.Offset()); err != nil {
			return err
		}
	}
}

// lastLine reports whether the line reader has nothing after its last line.
func lastLine(lr *trajectory.LineReader) bool {
	_, _, err := lr.Next()
	return errors.Is(err, io.EOF)
}

// compact rewrites a journal as its final file: one row per sample (the
// last written wins), sorted by data file and line, written to a temporary
// file, fsynced and renamed over the journal. Only an index of offsets is
// held in memory, never the rows.
func compact(path string) error {
	type entry struct {
		rowKey
		off int64
		n   int
	}
	idx := make(map[string]entry)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := scanReader(f, path, func(k rowKey, raw []byte, off int64) error {
		idx[k.Sample] = entry{rowKey: k, off: off, n: len(raw)}
		return nil
	}); err != nil {
		return fmt.Errorf("cannot compact: %w", err)
	}
	entries := make([]entry, 0, len(idx))
	for _, e := range idx {
		entries = append(entries, e)
	}
	sort.Slice(entries, func(a, b int) bool {
		x, y := entries[a], entries[b]
		if x.File != y.File {
			return x.File < y.File
		}
		if x.Line != y.Line {
			return x.Line < y.Line
		}
		return x.Sample < y.Sample
	})
	out, err := atomicfile.Create(path, nil)
	if err != nil {
		return err
	}
	defer out.Abort()
	bw := bufio.NewWriterSize(out, 1<<20)
	var buf []byte
	for _, e := range entries {
		if cap(buf) < e.n {
			buf = make([]byte, e.n)
		}
		if _, err := f.ReadAt(buf[:e.n], e.off); err != nil {
			return err
		}
		bw.Write(buf[:e.n])
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return out.Commit()
}
