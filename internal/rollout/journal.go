package rollout

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentworld/agentworld/internal/trajectory"
)

// journal appends rows to a JSONL file. Each row is one write(2) of a
// whole line to a file opened with O_APPEND, made when the episode ends,
// so a process killed at any instant leaves only complete lines (a torn
// last line, after a power loss, is cut on the next open and its episode
// run again).
type journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
	err  error
}

func openJournal(path string) (*journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := trajectory.CutTornTail(path); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &journal{f: f, path: path}, nil
}

// append writes rows in one write, so a kill leaves all of them or none.
func (j *journal) append(rows ...Row) error {
	var b []byte
	for _, r := range rows {
		line, err := trajectory.Marshal(r)
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	if _, err := j.f.Write(b); err != nil {
		j.err = fmt.Errorf("append %s: %w", j.path, err)
	}
	return j.err
}

func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return errors.Join(j.err, j.f.Sync(), j.f.Close())
}
