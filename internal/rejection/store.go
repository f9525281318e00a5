package rejection

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/agentworld/agentworld/internal/journal"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// syncInterval is how often appended files are fsynced while a run goes
// on: the one policy of package journal.
const syncInterval = journal.SyncInterval

// output is an output file, appended to after it was cut back to the last
// checkpoint; size is where it ends, which the next checkpoint records.
type output struct {
	*journal.Appender
	size int64
}

// openOutput cuts path to size bytes (what the last checkpoint counted)
// and opens it for appending.
func openOutput(path string, size int64) (*output, error) {
	if err := os.Truncate(path, size); err != nil && !(size == 0 && errors.Is(err, os.ErrNotExist)) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	a, err := journal.Open(path, syncInterval)
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
	err := journal.Rows(path, nil, func(c *checkpoint, _ []byte, _ int64) error {
		if c.Candidates <= sizes[0] && c.SFT <= sizes[1] && c.Pairs <= sizes[2] && c.Next >= best.Next {
			best = *c
		}
		return nil
	})
	return best, err
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
	err := journal.Rows(path, decodeJournalLine, func(l *journalLine, _ []byte, _ int64) error {
		if l.Seq < next {
			return nil
		}
		if l.Answer != nil {
			answers[l.Key] = l.Answer
			return nil
		}
		c := l.Candidate
		c.key = l.Key
		if scored[l.Seq] == nil {
			scored[l.Seq] = map[int]*Candidate{}
		}
		scored[l.Seq][l.Beam] = c
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return scored, answers, nil
}

// decodeJournalLine reads a journal line: a teacher answer or a scored beam.
func decodeJournalLine(b []byte, l *journalLine) error {
	if err := json.Unmarshal(b, l); err != nil {
		return fmt.Errorf("not a journal line: %v", err)
	}
	if l.Key == "" || (l.Answer == nil) == (l.Candidate == nil) {
		return errors.New(`not a journal line: want {"key", "seq", "beam", and "answer" or "candidate"}`)
	}
	return nil
}
