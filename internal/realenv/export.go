package realenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/trajectory"
)

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
// trajectory.WorldSystemPrompt.
type ExportOptions struct {
	// FirstID is the id of the first trajectory (ids are integers, one per
	// trajectory, shared by its rows as in the published data); 0 means 1.
	FirstID int64
	// SystemPrompt renders system_str for trajectories that carry only
	// components; nil means trajectory.WorldSystemPrompt.
	SystemPrompt trajectory.SystemPromptFunc
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
// {domain}_test.jsonl under dir (created if missing), one record per turn in
// the published format (trajectory.BenchRecords), each file written
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
		recs, err := trajectory.BenchRecords(t, id, o.SystemPrompt)
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
	if len(names) > 0 {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return stats, fmt.Errorf("export: %w", err)
		}
	}
	for _, n := range names {
		if err := atomicfile.WriteFile(n, bufs[n].Bytes(), nil); err != nil {
			return stats, fmt.Errorf("write %s: %w", n, err)
		}
	}
	return stats, nil
}
