// Package rollout drives agent policies through simulated worlds for
// reinforcement learning (Sim RL): an agent loop between an
// OpenAI-compatible policy server and simulator sessions, run in groups
// that share one start (one reset, then G forks of that root session), with
// one JSONL row per trajectory that trainers consume. Token ids and
// logprobs the policy server returns are passed through unchanged, never
// re-tokenized. A run is a journal: it resumes after kill -9 without
// repeating a finished episode.
package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentworld/agentworld/internal/trajectory"
)

// Task is one rollout task: a world to reset and an instruction for the
// agent.
type Task struct {
	// ID names the task in output rows; unique within a run.
	ID string `json:"id"`
	// World names a world the simulator has loaded.
	World string `json:"world"`
	// Instruction is what the agent is asked to do; "" leaves only the
	// world's task description.
	Instruction string `json:"instruction,omitempty"`
	// MaxTurns caps the agent's turns in this task; 0 means the run's.
	MaxTurns int `json:"max_turns,omitempty"`
	// Seed is the root session's seed; nil sends none.
	Seed *int64 `json:"seed,omitempty"`
	// RealWorld names a world served by a real environment (a terminal
	// task under --real-tasks) on which every episode that ended in
	// simulation is replayed, action for action, to check it against
	// reality; "" checks nothing.
	RealWorld string `json:"real_world,omitempty"`
}

// LoadTasks reads tasks from a JSONL file (one task object per line, blank
// lines skipped) or from every *.jsonl file of a directory, in name order.
// Errors name the file and line.
func LoadTasks(path string) ([]Task, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if st.IsDir() {
		files, err = filepath.Glob(filepath.Join(path, "*.jsonl"))
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no *.jsonl task files", path)
		}
	}
	var tasks []Task
	seen := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		lr := trajectory.NewLineReader(bytes.NewReader(b), f, 0)
		for {
			line, n, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			var t Task
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&t); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", f, n, err)
			}
			where := fmt.Sprintf("%s:%d", f, n)
			switch {
			case strings.TrimSpace(t.ID) == "":
				return nil, fmt.Errorf("%s: id: missing", where)
			case t.World == "":
				return nil, fmt.Errorf("%s: world: missing", where)
			case t.MaxTurns < 0:
				return nil, fmt.Errorf("%s: max_turns: negative", where)
			}
			if prev, ok := seen[t.ID]; ok {
				return nil, fmt.Errorf("%s: id: %q already used at %s", where, t.ID, prev)
			}
			seen[t.ID] = where
			tasks = append(tasks, t)
		}
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("%s: no tasks", path)
	}
	return tasks, nil
}
