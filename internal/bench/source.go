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
	"runtime"
	"strconv"
	"sync"

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
// name) or of one JSONL file to fn, in order. A malformed line is an error
// naming file:line unless skipBad is set, in which case it is counted in the
// stats. fn's error stops the walk.
//
// Rows average ~185 KB and decoding one costs about a millisecond, more
// than a run can spend per sample on one core, so one goroutine only reads
// lines and up to GOMAXPROCS others decode and hash them, a few rows ahead
// of fn; fn still gets the rows one at a time, in order. At most
// 2×GOMAXPROCS+2 rows are held besides the one fn has.
func ReadData(dir string, skipBad bool, fn func(*Item) error) (SourceStats, error) {
	return readData(dir, skipBad, 0, fn)
}

// readData is ReadData decoding up to ahead rows ahead of fn (at least
// 2×GOMAXPROCS+2, enough to keep every decoder busy). A run passes its
// concurrency: samples in flight tend to finish together (they were sent
// together), and the rows that refill their slots should be decoded by
// then, during the wait, not after it.
func readData(dir string, skipBad bool, ahead int, fn func(*Item) error) (SourceStats, error) {
	var st SourceStats
	files, err := trajectory.DataFiles(dir)
	if err != nil {
		return st, fmt.Errorf("data %s: %w", dir, err)
	}
	workers := runtime.GOMAXPROCS(0)
	ahead = max(ahead, 2*workers+2)
	ordered := make(chan *dataLine, ahead) // every line, in file order
	todo := make(chan *dataLine, ahead)    // lines to decode
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1 + workers)
	go func() {
		defer wg.Done()
		defer close(ordered)
		defer close(todo)
		readLines(files, ordered, todo, stop)
	}()
	for range workers {
		go func() {
			defer wg.Done()
			for l := range todo {
				select {
				case <-stop: // nobody waits for it
				default:
					l.decode()
				}
				close(l.done)
			}
		}()
	}
	// On an early return the reader stops at its next line and the
	// decoders finish the line they hold.
	defer wg.Wait()
	defer close(stop)

	seen := make(map[[32]byte]int)
	for l := range ordered {
		<-l.done
		if l.err != nil {
			if !skipBad || !l.skippable {
				return st, l.err
			}
			st.Skipped++
			if len(st.SkippedErrors) < maxSkippedErrors {
				st.SkippedErrors = append(st.SkippedErrors, l.err.Error())
			}
			continue
		}
		occ := seen[l.sum]
		seen[l.sum] = occ + 1
		base := filepath.Base(l.path)
		it := &Item{Sample: keyOf(l.sum, occ), File: base, Line: l.n, Record: l.rec}
		if l.invalid != nil {
			it.Err = fmt.Errorf("%s:%d (task %q id %s): %w", base, l.n, l.rec.Task, l.rec.ID.String(), l.invalid)
			st.Invalid++
		}
		st.Rows++
		if err := fn(it); err != nil {
			return st, err
		}
	}
	return st, nil
}

// maxSkippedErrors bounds SourceStats.SkippedErrors.
const maxSkippedErrors = 100

// dataLine is one non-blank line of a data file on its way to fn: read in
// order, decoded by any worker, and done once decoded (or failed).
type dataLine struct {
	path string
	n    int // 1-based line number
	raw  []byte

	done chan struct{}
	// err is an error at this line; skippable ones (a malformed line, a
	// line over the limit) are passed over under --skip-bad, others (the
	// file cannot be read) always stop the walk.
	err       error
	skippable bool
	rec       *trajectory.Record
	sum       [32]byte // SHA-256 of the trimmed line (see SampleKey)
	invalid   error    // rec.Validate's complaint
}

// decode turns the raw line into its record and content hash.
func (l *dataLine) decode() {
	raw := l.raw
	l.raw = nil
	rec := new(trajectory.Record)
	// Called directly: json.Unmarshal would first scan the whole line to
	// validate it, and the record's own decoder validates it again.
	if err := rec.UnmarshalJSON(raw); err != nil {
		l.err, l.skippable = &trajectory.LineError{File: l.path, Line: l.n, Err: err}, true
		return
	}
	l.rec = rec
	l.sum = sha256.Sum256(bytes.TrimSpace(raw))
	l.invalid = rec.Validate()
}

// readLines reads the files' lines in order, sending each to ordered and,
// unless it already failed, to todo. It stops after the first error that
// ends a file, or when stop is closed.
func readLines(files []string, ordered, todo chan<- *dataLine, stop <-chan struct{}) {
	send := func(l *dataLine) bool {
		select {
		case ordered <- l:
		case <-stop:
			return false
		}
		if l.err != nil {
			close(l.done)
			return true
		}
		select {
		case todo <- l:
			return true
		case <-stop:
			close(l.done)
			return false
		}
	}
	for _, path := range files {
		if !readFileLines(path, send) {
			return
		}
	}
}

// readFileLines sends one file's lines; false means stop reading.
func readFileLines(path string, send func(*dataLine) bool) bool {
	f, err := os.Open(path)
	if err != nil {
		send(&dataLine{path: path, done: make(chan struct{}), err: err})
		return false
	}
	defer f.Close()
	lr := trajectory.NewLineReader(f, path, 0)
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return true
		}
		l := &dataLine{path: path, n: n, done: make(chan struct{})}
		if err != nil {
			// A line over the limit is skipped like a malformed one and
			// reading goes on after it; any other error ends the file.
			l.err, l.skippable = err, errors.Is(err, trajectory.ErrLineTooLong)
			if !send(l) || !l.skippable {
				return false
			}
			continue
		}
		l.raw = bytes.Clone(line)
		if !send(l) {
			return false
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
		n, err := countLines(path, buf)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// countLines counts the lines of a file holding a byte other than ' ', '\t'
// and '\r'. Rows are long and start with '{', so it looks at the start of
// each line and lets bytes.IndexByte find the next newline.
func countLines(path string, buf []byte) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	blank := true // nothing but blanks since the last newline
	for {
		m, rerr := f.Read(buf)
		b := buf[:m]
		for len(b) > 0 {
			if blank {
				i := 0
				for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r') {
					i++
				}
				if i == len(b) {
					break
				}
				if b[i] == '\n' {
					b = b[i+1:]
					continue
				}
				blank = false
				b = b[i:]
			}
			j := bytes.IndexByte(b, '\n')
			if j < 0 {
				break
			}
			n++
			blank = true
			b = b[j+1:]
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, rerr
		}
	}
	if !blank {
		n++
	}
	return n, nil
}
