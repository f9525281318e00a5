package rejection

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// syncInterval is how often appended files are fsynced while a run goes
// on: a kill -9 loses nothing written (each line is one write(2) to an
// O_APPEND file), a power loss at most the last interval, which resume
// recomputes.
const syncInterval = time.Second

// appender appends whole lines to a file, one write per line.
type appender struct {
	mu       sync.Mutex
	f        *os.File
	path     string
	size     int64
	lastSync time.Time
}

// openAppender opens path for appending after cutting it to size bytes
// (size < 0: after cutting a torn last line).
func openAppender(path string, size int64) (*appender, error) {
	if size < 0 {
		if err := trajectory.CutTornTail(path); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if size >= 0 {
		if err := f.Truncate(size); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, err
	}
	f.Close()
	if f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, err
	}
	return &appender{f: f, path: path, size: end, lastSync: time.Now()}, nil
}

// line appends v as one JSON line.
func (a *appender) line(v any) error {
	b, err := trajectory.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.f.Write(b); err != nil {
		return fmt.Errorf("append %s: %w", a.path, err)
	}
	a.size += int64(len(b))
	if time.Since(a.lastSync) >= syncInterval {
		a.lastSync = time.Now()
		if err := a.f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", a.path, err)
		}
	}
	return nil
}

func (a *appender) close() error {
	if a == nil {
		return nil
	}
	return errors.Join(a.f.Sync(), a.f.Close())
}

// checkpoint is a line of the progress file, written after every sample's
// outputs: the samples done and the output sizes at that point.
type checkpoint struct {
	Next       int64 `json:"next"`
	Candidates int64 `json:"candidates"`
	SFT        int64 `json:"sft"`
	Pairs      int64 `json:"pairs"`
}

// lastCheckpoint returns the last checkpoint whose sizes the output files
// still reach (after a power loss a checkpoint may have outlived the data
// it counts); the zero checkpoint when there is none.
func lastCheckpoint(path string, sizes [3]int64) (checkpoint, error) {
	var best checkpoint
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return best, nil
	}
	if err != nil {
		return best, err
	}
	defer f.Close()
	lr := trajectory.NewLineReader(f, path, 0)
	for {
		b, _, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return best, nil
		}
		if err != nil {
			return best, err
		}
		var c checkpoint
		if json.Unmarshal(b, &c) != nil {
			continue // a torn line
		}
		if c.Candidates <= sizes[0] && c.SFT <= sizes[1] && c.Pairs <= sizes[2] && c.Next >= best.Next {
			best = c
		}
	}
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// readJournal returns the beams the journal holds for samples from next
// on, by sample and beam (1-based); earlier samples are already written
// and are not kept in memory.
func readJournal(path string, next int64) (map[int64]map[int]*Candidate, error) {
	out := map[int64]map[int]*Candidate{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lr := trajectory.NewLineReader(f, path, 0)
	for {
		b, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var c Candidate
		if err := json.Unmarshal(b, &c); err != nil || c.ID == "" {
			if _, _, nerr := lr.Next(); errors.Is(nerr, io.EOF) {
				return out, nil // a torn last line: that beam is done again
			}
			return nil, fmt.Errorf("%s:%d: not a journal line: %v", path, n, err)
		}
		if c.Seq < next {
			continue
		}
		if out[c.Seq] == nil {
			out[c.Seq] = map[int]*Candidate{}
		}
		out[c.Seq][c.Beam] = &c
	}
}

// cache keeps complete teacher answers on disk by request hash,
// <dir>/<two hex digits>/<hash>.json, each written atomically; a nil cache
// keeps nothing.
type cache struct{ dir string }

func (c *cache) path(key string) string { return filepath.Join(c.dir, key[:2], key+".json") }

func (c *cache) get(key string) (*worldmodel.Response, bool) {
	if c == nil {
		return nil, false
	}
	b, err := os.ReadFile(c.path(key))
	if err != nil {
		return nil, false
	}
	var r worldmodel.Response
	if json.Unmarshal(b, &r) != nil {
		return nil, false
	}
	return &r, true
}

// put stores an answer; a failed write only costs a request later.
func (c *cache) put(key string, r *worldmodel.Response) {
	if c == nil {
		return
	}
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	p := c.path(key)
	if os.MkdirAll(filepath.Dir(p), 0o755) != nil {
		return
	}
	_ = atomicfile.WriteFile(p, b, &atomicfile.Options{NoSync: true})
}
