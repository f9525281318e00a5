package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/journal"
)

// SyncInterval is how often a run's journals are fsynced: the one policy
// of package journal ([journal.SyncInterval]).
const SyncInterval = journal.SyncInterval

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

// scanRows calls fn for every row of a JSONL journal with its decoded
// key, its raw bytes (without the newline) and the offset they start at
// ([journal.Rows]: a missing file has none, a torn last row is dropped, any
// other line without a sample key is an error naming file:line).
func scanRows(path string, fn func(k rowKey, raw []byte, off int64) error) error {
	return journal.Rows(path, decodeRowKey, func(k *rowKey, raw []byte, off int64) error { return fn(*k, raw, off) })
}

// decodeRowKey reads the key of a row, which every row has.
func decodeRowKey(line []byte, k *rowKey) error {
	if err := json.Unmarshal(line, k); err != nil {
		return err
	}
	if k.Sample == "" {
		return errors.New("row without a sample key")
	}
	return nil
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
	f, err := os.Open(path) // for the rows' bytes, read by offset below
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			err = nil // nothing to compact
		}
		return err
	}
	defer f.Close()
	if err := scanRows(path, func(k rowKey, raw []byte, off int64) error {
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
