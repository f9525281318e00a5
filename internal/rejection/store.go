package rejection

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

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
	return a.write(append(b, '\n'))
}

// write appends whole lines in one write.
func (a *appender) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
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

// readJournal returns what the journal holds for samples from next on
// (earlier samples are written and are not kept in memory): the scored
// beams by sample and beam (1-based), and the teacher answers by request
// hash.
func readJournal(path string, next int64) (map[int64]map[int]*Candidate, map[string]*worldmodel.Response, error) {
	scored := map[int64]map[int]*Candidate{}
	answers := map[string]*worldmodel.Response{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return scored, answers, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	lr := trajectory.NewLineReader(f, path, 0)
	for {
		b, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return scored, answers, nil
		}
		if err != nil {
			return nil, nil, err
		}
		var l journalLine
		if err := json.Unmarshal(b, &l); err != nil || l.Key == "" || (l.Answer == nil) == (l.Candidate == nil) {
			if _, _, nerr := lr.Next(); errors.Is(nerr, io.EOF) {
				return scored, answers, nil // a torn last line: that beam is done again
			}
			if err == nil {
				err = errors.New(`want {"key", "seq", "beam", and "answer" or "candidate"}`)
			}
			return nil, nil, fmt.Errorf("%s:%d: not a journal line: %v", path, n, err)
		}
		if l.Seq < next {
			continue
		}
		if l.Answer != nil {
			answers[l.Key] = l.Answer
			continue
		}
		c := l.Candidate
		c.key = l.Key
		if scored[l.Seq] == nil {
			scored[l.Seq] = map[int]*Candidate{}
		}
		scored[l.Seq][l.Beam] = c
	}
}
