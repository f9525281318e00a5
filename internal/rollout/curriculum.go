package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentworld/agentworld/internal/journal"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// HistoryFile is the default name of the pass history, kept beside the
// run directories (in the parent of --out) so that runs of one project
// share it.
const HistoryFile = "pass-history.jsonl"

// PassRecord is one run's outcome of one task: N episodes of which Passed
// passed. A later record of the same run and task (a resumed run)
// replaces the earlier one.
type PassRecord struct {
	Run    string    `json:"run"`
	TaskID string    `json:"task_id"`
	N      int       `json:"n"`
	Passed int       `json:"passed"`
	PassK  float64   `json:"pass_at_k"`
	K      int       `json:"k"`
	At     time.Time `json:"at"`
}

// PassRate is a task's record over every run in a history.
type PassRate struct {
	Runs   int
	N      int
	Passed int
}

// Rate is Passed / N (0 when N is 0).
func (p PassRate) Rate() float64 {
	if p.N == 0 {
		return 0
	}
	return float64(p.Passed) / float64(p.N)
}

// AppendHistory appends a run's per-task outcomes (its summary's groups)
// to the history at path, in one write.
func AppendHistory(path, run string, s *Summary) error {
	a, err := journal.Open(path, 0)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	vs := make([]any, 0, len(s.Groups))
	for _, g := range s.Groups {
		vs = append(vs, PassRecord{Run: run, TaskID: g.TaskID, N: g.N, Passed: g.Passed, PassK: g.PassAtK, K: s.K, At: now})
	}
	return errors.Join(a.Append(vs...), a.Close())
}

// ReadHistory sums a history per task, counting each (run, task) once: its
// last record. A missing file is an empty history.
func ReadHistory(path string) (map[string]PassRate, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]PassRate{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type rk struct{ run, task string }
	last := map[rk]PassRecord{}
	lr := trajectory.NewLineReader(f, path, 0)
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var r PassRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		last[rk{r.Run, r.TaskID}] = r
	}
	out := map[string]PassRate{}
	for _, r := range last {
		p := out[r.TaskID]
		p.Runs++
		p.N += r.N
		p.Passed += r.Passed
		out[r.TaskID] = p
	}
	return out, nil
}

// CurriculumStats says what a curriculum selection kept.
type CurriculumStats struct {
	// Kept tasks have a pass rate strictly between 0 and 1; Unseen tasks
	// have no history and are kept too (their rate is unknown).
	Kept, Unseen int
	// AlwaysFailed and AlwaysPassed were left out: every group of them
	// would have equal rewards, which gives GRPO no signal.
	AlwaysFailed, AlwaysPassed int
}

// Curriculum keeps the tasks whose pass rate over the history lies
// strictly between 0 and 1, and those the history has not seen, in their
// order.
func Curriculum(tasks []Task, hist map[string]PassRate) ([]Task, CurriculumStats) {
	var out []Task
	var st CurriculumStats
	for _, t := range tasks {
		p, ok := hist[t.ID]
		switch {
		case !ok || p.N == 0:
			st.Unseen++
			out = append(out, t)
		case p.Passed == 0:
			st.AlwaysFailed++
		case p.Passed == p.N:
			st.AlwaysPassed++
		default:
			st.Kept++
			out = append(out, t)
		}
	}
	return out, st
}

// DefaultHistoryPath is the history beside a run directory.
func DefaultHistoryPath(out string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(out)), HistoryFile)
}
