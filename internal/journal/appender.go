package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/trajectory"
)

// Appender is an append-only JSONL journal, the durable record that lets a
// long job resume after kill -9.
//
// Every [Appender.Append] is one write(2) of whole lines to a file opened
// with O_APPEND, made as soon as the rows are known, so a process killed at
// any instant leaves only complete lines and nothing finished is lost. A
// power loss can still tear the last line: [Open] cuts it (with
// [CutTornTail]) so new rows start on a line of their own, and the reader's
// job recomputes it. After the first failed write every later call returns
// that error.
type Appender struct {
	mu        sync.Mutex
	f         *os.File
	path      string
	syncEvery time.Duration
	lastSync  time.Time
	err       error
}

// Open opens path for appending, creating it and its directory. A
// syncEvery above 0 fsyncs the file at most that often while rows arrive
// (bounding what a power loss can take); 0 fsyncs only at Close.
func Open(path string, syncEvery time.Duration) (*Appender, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := CutTornTail(path); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &Appender{f: f, path: path, syncEvery: syncEvery, lastSync: time.Now()}, nil
}

// Append writes each value as one line ([trajectory.Marshal]), all of them in a single
// write, so a kill leaves all of them or none.
func (a *Appender) Append(vs ...any) error {
	var b []byte
	for _, v := range vs {
		line, err := trajectory.Marshal(v)
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	return a.AppendLines(b)
}

// AppendLines writes b, whole lines already encoded (each ending in a
// newline), in a single write: for a writer that batches rows it encoded
// itself and would otherwise encode them twice.
func (a *Appender) AppendLines(b []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	if len(b) == 0 {
		return nil
	}
	if _, err := a.f.Write(b); err != nil {
		a.err = fmt.Errorf("append %s: %w", a.path, err)
		return a.err
	}
	if a.syncEvery > 0 && time.Since(a.lastSync) >= a.syncEvery {
		a.lastSync = time.Now()
		if err := a.f.Sync(); err != nil {
			a.err = fmt.Errorf("sync %s: %w", a.path, err)
		}
	}
	return a.err
}

// Close fsyncs and closes the file, returning the first append error too.
func (a *Appender) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(a.err, a.f.Sync(), a.f.Close())
}

// CutTornTail truncates a JSONL file after its last newline, so lines
// appended next start on a line of their own instead of extending a line a
// crash tore. A missing file is left missing. It searches backwards from
// the end rather than reading lines forward, so opening a large file costs
// one block, not a pass over every line.
func CutTornTail(path string) error {
	f, err := openExisting(path, os.O_RDWR)
	if f == nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	size := st.Size()
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			if cut := start + int64(i) + 1; cut != size {
				return f.Truncate(cut)
			}
			return nil
		}
		end = start
	}
	return f.Truncate(0)
}
