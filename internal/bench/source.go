package bench

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// Item is one evaluation row read from a data dir, streamed so that a 400 MB
// set is never held whole.
type Item struct {
	// Sample is the row's stable identity (see SampleKey).
	Sample string
	// File is the base name of the data file; Line its 1-based line.
	File string
	Line int
	// Record is the decoded row; nil when Err is set.
	Record *trajectory.Record
	// Err is set for a row that decoded but cannot be evaluated
	// (trajectory.ErrTurnRange, trajectory.ErrMissingField); the pipeline
	// turns it into a FailInvalidRecord row instead of dropping it.
	Err error
}

// Domain is the row's domain: the last part of its task, or the data file's
// name when the task is missing.
func (it *Item) Domain() string {
	if it.Record != nil && it.Record.Task != "" {
		return string(domain.FromTask(it.Record.Task))
	}
	return trajectory.DomainFromFile(it.File)
}

// SampleKey identifies an evaluation row by content, not by id (ids repeat
// in the published data): the SHA-256 of the raw line and how many identical
// lines came before it in the data dir. The key survives reordering of
// files and is what resume and the final sort use.
func SampleKey(line []byte, occurrence int) string {
	return keyOf(sha256.Sum256(bytes.TrimSpace(line)), occurrence)
}

func keyOf(sum [32]byte, occurrence int) string {
	return hex.EncodeToString(sum[:16]) + "." + strconv.Itoa(occurrence)
}

// SourceStats counts what reading a data dir met.
type SourceStats struct {
	// Rows is the number of rows yielded, invalid ones included.
	Rows int `json:"rows"`
	// Invalid counts rows that decoded but cannot be evaluated.
	Invalid int `json:"invalid"`
	// Skipped counts malformed lines passed over under SkipBad; SkippedErrors
	// names each (file:line: reason), at most 100 of them.
	Skipped       int      `json:"skipped"`
	SkippedErrors []string `json:"skipped_errors,omitempty"`
}

// ReadData streams every row of a data dir (every *_test.jsonl, sorted by
// name) or of one JSONL file to fn, in order, holding one line at a time. A
// malformed line is an error naming file:line unless skipBad is set, in
// which case it is counted in the stats. fn's error stops the walk.
func ReadData(dir string, skipBad bool, fn func(*Item) error) (SourceStats, error) {
	var st SourceStats
	files, err := trajectory.DataFiles(dir)
	if err != nil {
		return st, fmt.Errorf("data %s: %w", dir, err)
	}
	seen := make(map[[32]byte]int)
	for _, path := range files {
		if err := readFile(path, skipBad, seen, &st, fn); err != nil {
			return st, err
		}
	}
	return st, nil
}

// maxSkippedErrors bounds SourceStats.SkippedErrors.
const maxSkippedErrors = 100

func readFile(path string, skipBad bool, seen map[[32]byte]int, st *SourceStats, fn func(*Item) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	base := filepath.Base(path)
	rr := trajectory.NewRecordReader(f, path)
	rr.SkipBad = skipBad
	rr.MaxErrors = maxSkippedErrors
	defer func() {
		st.Skipped += rr.Skipped
		for _, err := range rr.Errors {
			if len(st.SkippedErrors) < maxSkippedErrors {
				st.SkippedErrors = append(st.SkippedErrors, err.Error())
			}
		}
	}()
	for {
		rec, n, err := rr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		sum := sha256.Sum256(bytes.TrimSpace(rr.Raw()))
		occ := seen[sum]
		seen[sum] = occ + 1
		it := &Item{Sample: keyOf(sum, occ), File: base, Line: n, Record: rec}
		if verr := rec.Validate(); verr != nil {
			it.Err = fmt.Errorf("%s:%d (task %q id %s): %w", base, n, rec.Task, rec.ID.String(), verr)
			st.Invalid++
		}
		st.Rows++
		if err := fn(it); err != nil {
			return err
		}
	}
}

// CountRows counts the non-blank lines of a data dir without decoding them,
// for progress totals; it reads at disk speed and holds one buffer. Only
// ASCII whitespace makes a line blank here, so a line of Unicode spaces
// (which readers skip) is counted: the count is an upper bound.
func CountRows(dir string) (int, error) {
	files, err := trajectory.DataFiles(dir)
	if err != nil {
		return 0, fmt.Errorf("data %s: %w", dir, err)
	}
	total := 0
	buf := make([]byte, 1<<20)
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return 0, err
		}
		blank := true
		for {
			n, rerr := f.Read(buf)
			for _, c := range buf[:n] {
				switch c {
				case '\n':
					if !blank {
						total++
					}
					blank = true
				case ' ', '\t', '\r':
				default:
					blank = false
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				f.Close()
				return 0, rerr
			}
		}
		if !blank {
			total++
		}
		f.Close()
	}
	return total, nil
}
