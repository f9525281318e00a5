package reward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentworld/agentworld/internal/journal"
	"github.com/agentworld/agentworld/internal/progress"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// ScoredLine is one line of an offline output file: the input line number
// (the item's identity in the file, as ids may repeat) and its result.
type ScoredLine struct {
	Line int `json:"line"`
	Result
}

// FileOptions tune [ScoreFile]; nil means every default.
type FileOptions struct {
	// Workers is how many items are scored at once (judge calls stay within
	// the scorer's own bound); 0 means 64.
	Workers int
	// Progress receives the progress line of the run (package progress:
	// redrawn on a terminal, else a line every ProgressInterval) and a last
	// one at the end; nil writes none.
	Progress io.Writer
	// ProgressInterval is the plain-line interval; 0 means
	// progress.DefaultInterval.
	ProgressInterval time.Duration
}

// FileSummary counts what an offline run did.
type FileSummary struct {
	// Total is the number of item lines in the input; Resumed those the
	// output already held; Scored those scored now.
	Total   int `json:"total"`
	Resumed int `json:"resumed"`
	Scored  int `json:"scored"`
	// Failed counts lines scored 0 or dropped because of a failure: bad
	// input lines, no answer, judge failures under the zero or drop policy.
	// JudgeFallback counts items whose rubric came from the rules scorer.
	Failed        int `json:"failed"`
	JudgeFallback int `json:"judge_fallback"`
}

// ScoreFile scores a JSONL file of [Item]s into a JSONL file of
// [ScoredLine]s. The output is also its journal: run again after a crash
// (kill -9 included) it keeps the lines already written, cuts a torn last
// line, and scores only the input lines missing. Output lines are written
// in input order (Line says which input line each answers), so the output
// of a run, resumed or not, lines up with its input; at most a window of
// 4 × Workers lines waits for a slow one before it. A
// malformed input line is answered with a 0 and a reason naming it, and
// counted; only an unreadable file or an output that is not this run's
// format stops the run.
func ScoreFile(ctx context.Context, s *Scorer, in, out string, opts *FileOptions) (FileSummary, error) {
	var o FileOptions
	if opts != nil {
		o = *opts
	}
	if o.Workers <= 0 {
		o.Workers = 64
	}
	var sum FileSummary
	done, err := resumeOutput(out)
	if err != nil {
		return sum, err
	}
	total, err := countLines(in)
	if err != nil {
		return sum, err
	}
	sum.Total = total
	f, err := os.Open(in)
	if err != nil {
		return sum, err
	}
	defer f.Close()
	w, err := journal.Open(out, journal.SyncInterval) // cuts a torn last line
	if err != nil {
		return sum, err
	}
	defer w.Close()

	type job struct {
		seq  int // position among the lines scored now: the write order
		line int
		it   Item
		bad  error
	}
	type lineResult struct {
		seq int
		ScoredLine
	}
	var resumed atomic.Int64 // counted by the reader, read by progress
	jobs := make(chan job)
	results := make(chan lineResult)
	// window bounds the lines read but not yet written, so the results
	// held back behind a slow line stay few.
	window := make(chan struct{}, 4*o.Workers)
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				var r Result
				if j.bad != nil {
					r = s.finish(Result{ID: j.it.ID}, j.it, "invalid item: "+j.bad.Error())
				} else {
					r = s.Score(ctx, j.it)
				}
				results <- lineResult{seq: j.seq, ScoredLine: ScoredLine{Line: j.line, Result: r}}
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(jobs)
		lr := trajectory.NewLineReader(f, in, 0)
		for seq := 0; ; seq++ {
			b, n, err := lr.Next()
			if errors.Is(err, io.EOF) {
				readErr <- nil
				return
			}
			j := job{line: n}
			if err != nil {
				var le *trajectory.LineError
				if !errors.As(err, &le) || !errors.Is(err, trajectory.ErrLineTooLong) {
					readErr <- err
					return
				}
				j.bad = err
			} else if done[n] {
				resumed.Add(1)
				seq--
				continue
			} else if derr := json.Unmarshal(b, &j.it); derr != nil {
				j.bad = fmt.Errorf("%s:%d: %v", in, n, derr)
			}
			j.seq = seq
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				readErr <- ctx.Err()
				return
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				readErr <- ctx.Err()
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	var scored, failed atomic.Int64 // written by this loop, read by the progress line
	started := time.Now()
	ticker := progress.Start(o.Progress, o.ProgressInterval, func() string {
		res := resumed.Load()
		done := res + scored.Load()
		rate, eta := progress.Rate(done, res, int64(total), started)
		return fmt.Sprintf("reward score: %d/%d items (%d resumed), %.1f items/s, ETA %s, failed %d", done, total, res, rate, eta, failed.Load())
	})
	defer ticker.Stop()
	var werr error
	// held are results waiting for the lines before them; next is the
	// write position.
	held := map[int]ScoredLine{}
	next := 0
	for {
		select {
		case sr, ok := <-results:
			if !ok {
				sum.Resumed = int(resumed.Load())
				if err := <-readErr; err != nil {
					return sum, err
				}
				return sum, werr
			}
			held[sr.seq] = sr.ScoredLine
			for {
				r, ok := held[next]
				if !ok {
					break
				}
				delete(held, next)
				next++
				<-window
				if werr != nil {
					continue // drain the workers; the first write error is returned
				}
				if r.Dropped && ctx.Err() != nil {
					// Cut short by cancellation: scored again on resume. The
					// lines after it are not written either, so the output
					// stays in input order.
					werr = ctx.Err()
					continue
				}
				b, err := json.Marshal(r)
				if err != nil {
					werr = err
					continue
				}
				// One write per line: a kill leaves at most a torn last
				// line, which the next run cuts.
				if err := w.AppendLines(append(b, '\n')); err != nil {
					werr = err
					continue
				}
				sum.Scored++
				scored.Add(1)
				if r.Dropped || (r.Value() == 0 && r.Reason != "") {
					sum.Failed++
					failed.Add(1)
				}
				if r.Judge.Fallback != "" {
					sum.JudgeFallback++
				}
			}
		}
	}
}

// resumeOutput reads the lines an earlier run wrote and returns the input
// line numbers they answer ([journal.Rows]: a torn last line is dropped,
// scored again, and cut when the output is opened); any other line that
// is not a reward output line is an error naming it.
func resumeOutput(path string) (map[int]bool, error) {
	done := map[int]bool{}
	err := journal.Rows(path, decodeScoredLine, func(sl *ScoredLine, _ []byte, _ int64) error {
		done[sl.Line] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

// decodeScoredLine reads a line of an offline output file.
func decodeScoredLine(b []byte, sl *ScoredLine) error {
	if err := json.Unmarshal(b, sl); err != nil || sl.Line <= 0 {
		return fmt.Errorf("not a line of a reward output (want {\"line\": N, ...}): %v", err)
	}
	return nil
}

// countLines counts the non-blank lines of the input for progress.
func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	lr := trajectory.NewLineReader(f, path, 0)
	n := 0
	for {
		_, _, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil && !errors.Is(err, trajectory.ErrLineTooLong) {
			return 0, err
		}
		n++
	}
}
