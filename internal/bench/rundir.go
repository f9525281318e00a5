package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/filelock"
)

// RunLockFile is the lock file in a run directory that makes one Run its
// only writer: two runs on one directory would both pay for every sample
// and interleave their rows.
const RunLockFile = "run.lock"

// lockRunDir takes the run directory's lock, failing at once with an error
// wrapping filelock.ErrHeld and naming the directory when another run (in
// this process or another) holds it. The system drops the lock when the
// process exits, however it exits, so a killed run resumes without a
// stale lock.
func lockRunDir(out string) (*filelock.Lock, error) {
	return filelock.Acquire(filepath.Join(out, RunLockFile), "run directory "+out)
}

// JudgedPathOf accepts a run directory or a judged file and returns the
// judged file.
func JudgedPathOf(run string) string {
	if st, err := os.Stat(run); err == nil && st.IsDir() {
		return filepath.Join(run, JudgedFile)
	}
	return run
}

// runLabel names a run after its directory (or its judged file's directory).
func runLabel(run string) string {
	p := filepath.Clean(run)
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		p = filepath.Dir(p)
	}
	return filepath.Base(p)
}

// LoadRun scores a run directory or judged file, labelled with the run's
// directory name.
func LoadRun(run string, opts *ScoreOptions) (*Report, []*Judged, error) {
	rows, err := ReadJudged(JudgedPathOf(run))
	if err != nil {
		return nil, nil, fmt.Errorf("run %s: %w", run, err)
	}
	var o ScoreOptions
	if opts != nil {
		o = *opts
	}
	if o.Label == "" {
		o.Label = runLabel(run)
	}
	rep := Score(rows, &o)
	rep.attachPromptFiles(filepath.Dir(JudgedPathOf(run)))
	return rep, rows, nil
}

// CompareRuns scores each run and sets them side by side, the first as
// baseline.
func CompareRuns(runs []string, opts *ScoreOptions) (*Comparison, error) {
	reps := make([]*Report, 0, len(runs))
	for _, r := range runs {
		rep, _, err := LoadRun(r, opts)
		if err != nil {
			return nil, err
		}
		reps = append(reps, rep)
	}
	return Compare(reps...), nil
}

// WriteHTMLReport renders the HTML report of a run directory (or judged
// file) to htmlPath atomically. The records of the worst samples are read
// from dataDir, or from the data dir recorded in the run's run.json when
// dataDir is empty.
func WriteHTMLReport(run, htmlPath, dataDir string, opts *ScoreOptions) error {
	rep, rows, err := LoadRun(run, opts)
	if err != nil {
		return err
	}
	if dataDir == "" {
		dataDir, _ = RunData(filepath.Dir(JudgedPathOf(run)))
	}
	var buf bytes.Buffer
	if err := WriteHTML(rep, rows, &buf, &HTMLOptions{DataDir: dataDir}); err != nil {
		return fmt.Errorf("report %s: %w", run, err)
	}
	if err := writeFileAtomic(htmlPath, buf.Bytes()); err != nil {
		return fmt.Errorf("write %s: %w", htmlPath, err)
	}
	return nil
}

// writeFileAtomic creates path's directory and writes b through atomicfile,
// synced: the run files (run.json, summaries, the HTML report) are results.
func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, nil)
}
