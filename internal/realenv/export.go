package realenv

import (
	"github.com/agentworld/agentworld/internal/atomicfile"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// SystemPromptFunc renders the world-model system prompt of a domain from
// the five components.
type SystemPromptFunc func(d domain.Domain, c trajectory.Components) (string, error)

// DefaultSystemPrompt renders the domain's world-model system prompt from
// the five components with the same templates the simulator uses, so an
// exported record's system_str is what `agentworld serve` would send.
func DefaultSystemPrompt(d domain.Domain, c trajectory.Components) (string, error) {
	return domain.RenderWorldPrompt(d, domain.WorldPromptParts{
		TaskDescription:       c.TaskDescription,
		ActionSpace:           c.ActionSpace,
		InitialState:          c.InitialState,
		Demonstrations:        sim.RenderDemonstrations(c.Demonstrations),
		SimulationInstruction: c.SimulationInstruction,
	})
}

// ReadTrajectories loads unified trajectories from files and directories:
// a .json file holds one trajectory, a .jsonl file one per line, and a
// directory contributes every .json and .jsonl file in it (sorted). Errors
// name the file and line.
func ReadTrajectories(paths ...string) ([]*trajectory.Trajectory, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			n := e.Name()
			if e.Type().IsRegular() && !strings.HasPrefix(n, ".") && (strings.HasSuffix(n, ".json") || strings.HasSuffix(n, ".jsonl")) {
				files = append(files, filepath.Join(p, n))
			}
		}
	}
	slices.Sort(files)
	var out []*trajectory.Trajectory
	for _, f := range files {
		ts, err := readTrajectoryFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

func readTrajectoryFile(path string) ([]*trajectory.Trajectory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if strings.HasSuffix(path, ".jsonl") {
		lr := trajectory.NewLineReader(f, path, 0)
		var out []*trajectory.Trajectory
		for {
			line, n, err := lr.Next()
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return nil, err
			}
			t := new(trajectory.Trajectory)
			if err := json.Unmarshal(line, t); err != nil {
				return nil, &trajectory.LineError{File: path, Line: n, Err: err}
			}
			out = append(out, t)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	t := new(trajectory.Trajectory)
	if err := json.Unmarshal(bytes.TrimSpace(b), t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return []*trajectory.Trajectory{t}, nil
}

// ExportOptions configure ExportRecords. The zero value numbers
// trajectories from 1 and renders missing system prompts with
// DefaultSystemPrompt.
type ExportOptions struct {
	// FirstID is the id of the first trajectory (ids are integers, one per
	// trajectory, shared by its rows as in the published data); 0 means 1.
	FirstID int64
	// SystemPrompt renders system_str for trajectories that carry only
	// components; nil means DefaultSystemPrompt.
	SystemPrompt SystemPromptFunc
}

// TrajectoryRecords turns one trajectory into AgentWorldBench records, one
// per turn: every record holds the whole prompt and response lists, the
// system prompt, and the evaluated turn's index. The trajectory's own id
// and source are kept as extra fields.
func TrajectoryRecords(t *trajectory.Trajectory, id int64, sp SystemPromptFunc) ([]*trajectory.Record, error) {
	if sp == nil {
		sp = DefaultSystemPrompt
	}
	if len(t.Turns) == 0 {
		return nil, fmt.Errorf("trajectory %s: %w: turns (empty trajectory)", t.ID, trajectory.ErrMissingField)
	}
	d, err := domain.Parse(t.Domain)
	if err != nil {
		return nil, fmt.Errorf("trajectory %s: %w", t.ID, err)
	}
	system := t.SystemPrompt
	if strings.TrimSpace(system) == "" {
		if t.Components == nil {
			return nil, fmt.Errorf("trajectory %s: %w: system_prompt or components", t.ID, trajectory.ErrMissingField)
		}
		if system, err = sp(d, *t.Components); err != nil {
			return nil, fmt.Errorf("trajectory %s: system prompt: %w", t.ID, err)
		}
	}
	prompts := make([]string, len(t.Turns))
	responses := make([]string, len(t.Turns))
	for i, tu := range t.Turns {
		prompts[i] = trajectory.ActionPrompt(i+1, tu.Action)
		responses[i] = trajectory.ObservationResponse(tu.Observation)
	}
	var extra []trajectory.Field
	for _, kv := range [][2]string{{"trajectory_id", t.ID}, {"source", t.Source}} {
		if kv[1] != "" {
			b, _ := trajectory.Marshal(kv[1])
			extra = append(extra, trajectory.Field{Key: kv[0], Value: b})
		}
	}
	out := make([]*trajectory.Record, len(t.Turns))
	for i := range t.Turns {
		out[i] = &trajectory.Record{
			Task:          string(d),
			ID:            trajectory.IntID(strconv.FormatInt(id, 10)),
			Prompt:        prompts,
			Response:      responses,
			CurrentPrompt: prompts[i],
			SystemStr:     system,
			TurnIdx:       i + 1,
			TotalTurns:    len(t.Turns),
			Extra:         extra,
		}
		if err := out[i].Validate(); err != nil {
			return nil, fmt.Errorf("trajectory %s turn %d: %w", t.ID, i+1, err)
		}
	}
	return out, nil
}

// ExportStats says what ExportRecords wrote.
type ExportStats struct {
	// Files maps each written file to its record count.
	Files map[string]int `json:"files"`
	// Trajectories is how many trajectories were exported; Skipped lists
	// the ones left out (no turns) with the reason.
	Trajectories int      `json:"trajectories"`
	Skipped      []string `json:"skipped,omitempty"`
}

// ExportRecords writes trajectories as AgentWorldBench data files,
// {domain}_test.jsonl under dir, one record per turn, each file written
// atomically. Trajectories without turns are skipped and listed.
func ExportRecords(trajs []*trajectory.Trajectory, dir string, opts *ExportOptions) (ExportStats, error) {
	var o ExportOptions
	if opts != nil {
		o = *opts
	}
	if o.FirstID == 0 {
		o.FirstID = 1
	}
	stats := ExportStats{Files: map[string]int{}}
	bufs := map[string]*bytes.Buffer{}
	id := o.FirstID
	for _, t := range trajs {
		if len(t.Turns) == 0 {
			stats.Skipped = append(stats.Skipped, t.ID+": no turns")
			continue
		}
		recs, err := TrajectoryRecords(t, id, o.SystemPrompt)
		if err != nil {
			return stats, err
		}
		id++
		stats.Trajectories++
		name := filepath.Join(dir, recs[0].Task+"_test.jsonl")
		if bufs[name] == nil {
			bufs[name] = new(bytes.Buffer)
		}
		for _, r := range recs {
			if err := trajectory.WriteRecord(bufs[name], r); err != nil {
				return stats, err
			}
		}
		stats.Files[name] += len(recs)
	}
	names := make([]string, 0, len(bufs))
	for n := range bufs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := atomicfile.WriteFile(n, bufs[n].Bytes(), nil); err != nil {
			return stats, fmt.Errorf("write %s: %w", n, err)
		}
	}
	return stats, nil
}
