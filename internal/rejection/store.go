package rejection

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// syncInterval is how often appended files are fsynced while a run goes
// on: a kill -9 loses nothing written (each batch of lines is one write(2)
// to an O_APPEND file, trajectory.Appender), a power loss at most the last
// interval, which resume recomputes.
const syncInterval = time.Second

// output is an output file, appended to after it was cut back to the last
// checkpoint; size is where it ends, which the next checkpoint records.
type output struct {
	*trajectory.Appender
	size int64
}

// openOutput cuts path to size bytes (what the last checkpoint counted)
// and opens it for appending.
func openOutput(path string, size int64) (*output, error) {
	if err := os.Truncate(path, size); err != nil && !(size == 0 && errors.Is(err, os.ErrNotExist)) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	a, err := trajectory.OpenAppender(path, syncInterval)
	if err != nil {
		return nil, err
	}
	return &output{Appender: a, size: size}, nil
}

// write appends whole lines in one write.
func (o *output) write(b []byte) error {
	if err := o.AppendLines(b); err != nil {
		return err
	}
	o.size += int64(len(b))
	return nil
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
