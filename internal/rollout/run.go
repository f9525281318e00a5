package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/journal"
	"github.com/agentworld/agentworld/internal/progress"
	"github.com/agentworld/agentworld/internal/runpin"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/workqueue"
	"github.com/agentworld/agentworld/internal/world"
)

// Output files in a run directory.
const (
	// EpisodesFile holds one [Row] per finished episode; it is also the
	// run's journal.
	EpisodesFile = "episodes.jsonl"
	// SummaryFile holds the [Summary], rewritten at the end of each run.
	SummaryFile = "summary.json"
	// RunFile pins the directory to the settings of the run that made it
	// ([Settings]; see package runpin): a rerun with other settings is
	// refused rather than mixed into the same journal.
	RunFile = "run.json"
)

// Settings are what makes a run's episodes comparable, pinned in RunFile:
// the policy's model and sampling, the group shape and the world model.
// The policy's URL is not (a server may move), nor the tasks (a rerun may
// add some).
type Settings struct {
	PolicyModel       string   `json:"policy_model"`
	PolicyTemperature *float64 `json:"policy_temperature,omitempty"`
	PolicyMaxTokens   int      `json:"policy_max_tokens,omitempty"`
	GroupSize         int      `json:"group_size"`
	EpisodeTurns      int      `json:"episode_turns"`
	BranchAt          int      `json:"branch_at,omitempty"`
	WorldModel        string   `json:"world_model,omitempty"`
}

// ErrSettingsChanged means the run directory holds episodes made with
// other [Settings].
var ErrSettingsChanged = runpin.ErrSettingsChanged

// Options configures [Run]. The zero value of each field is a usable
// default except Policy, which is required.
type Options struct {
	// Policy is the agent; required.
	Policy *Policy
	// GroupSize is the number of forks of each task's root session (G); 0
	// means 8.
	GroupSize int
	// MaxTurns caps the agent's turns per episode when a task sets none; 0
	// means 30.
	MaxTurns int
	// MaxInFlight bounds the episodes run at once; 0 means 16
	// (defaultMaxInFlight).
	MaxInFlight int
	// BranchAt > 0 makes tree groups: one episode (the trunk) runs from
	// the root for BranchAt policy turns, then its session is forked
	// GroupSize times and each fork continues it, so the members share
	// their history up to that turn. A group's rows are written together,
	// so a rerun after a kill runs the whole group again or not at all. 0
	// forks at the root.
	BranchAt int
	// LWMModel names the world model in rows whose steps report none; ""
	// leaves it empty.
	LWMModel string
	// Progress receives the progress line (package progress: redrawn on a
	// terminal, else a line every ProgressEvery) and a last one
	// at the end; nil writes none.
	Progress io.Writer
	// ProgressEvery is the progress interval; 0 means 2s.
	ProgressEvery time.Duration
	// Logger receives episode failures; nil discards them.
	Logger *slog.Logger
	// Queue, when set, runs the episodes on a work queue's workers
	// ([workqueue.Coordinator], whose workers run [Worker]) instead of on
	// the Simulator given to Run, which may then be nil. Each episode of
	// a group forked at the root is one item, with the id "TASK/SAMPLE"
	// (its group and index); a tree group (BranchAt > 0) is one item,
	// "TASK", whose members finish together as in a local run. An item's
	// payload is its [WorkItem], its result the members' rows as JSON,
	// which Run journals exactly as it journals its own episodes: the
	// directory ends as a local run's does, and a rerun after a kill asks
	// only for the episodes its journal lacks (the queue keeps each
	// item's result once, so an episode a worker finished meanwhile is
	// collected, not run again). A failed item is forgotten, so a rerun
	// tries it again. MaxInFlight then bounds the items out at once. nil
	// runs the episodes here.
	Queue workqueue.Dispatcher
}

func (o *Options) defaults() {
	if o.GroupSize <= 0 {
		o.GroupSize = 8
	}
	if o.MaxTurns <= 0 {
		o.MaxTurns = 30
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = defaultMaxInFlight
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

const defaultMaxInFlight = 16

// key identifies an episode within a run.
type key struct {
	Group  string
	Sample int
}

// Result counts what one [Run] call did.
type Result struct {
	// Resumed episodes were already in the journal and not run again.
	Resumed int
	// Done episodes finished in this call.
	Done int
	// Failed episodes stopped on a policy or simulator error; they are not
	// written, so a rerun computes them.
	Failed int
	// Summary covers every episode in the journal.
	Summary *Summary
	// Workers counts, with a Queue, the episodes each worker returned in
	// this call, by worker name; nil without one.
	Workers map[string]int
}

// Run rolls out every task in groups into dir: for each task one reset
// (the root session), then GroupSize forks of that root, each driven by
// the policy until the episode ends or its turns run out. Finished
// episodes are appended to dir/episodes.jsonl as they end, and a rerun
// skips them, so a run killed at any moment resumes without repeating
// one. Failed episodes are logged, counted and left for a rerun; Run
// returns an error when any failed.
func Run(ctx context.Context, s Simulator, tasks []Task, dir string, opts *Options) (*Result, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.defaults()
	if o.Policy == nil {
		return nil, errors.New("rollout: no policy")
	}
	if s == nil && o.Queue == nil {
		return nil, errors.New("rollout: no simulator")
	}
	st := Settings{PolicyModel: o.Policy.Model, PolicyTemperature: o.Policy.Temperature, PolicyMaxTokens: o.Policy.MaxTokens,
		GroupSize: o.GroupSize, EpisodeTurns: o.MaxTurns, BranchAt: o.BranchAt, WorldModel: o.LWMModel}
	if err := runpin.Check(dir, RunFile, st); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, EpisodesFile)
	// Opening the journal first cuts a line a kill tore, so the pass over
	// it reads whole rows only.
	j, err := journal.Open(path, 0)
	if err != nil {
		return nil, err
	}
	stats := newSummarizer(o.GroupSize)
	done, err := readJournal(path, stats)
	if err != nil {
		return nil, errors.Join(err, j.Close())
	}
	res := &Result{}
	total := len(tasks) * o.GroupSize
	for _, t := range tasks {
		for i := range o.GroupSize {
			if done[key{t.ID, i}] {
				res.Resumed++
			}
		}
	}

	var (
		nDone    atomic.Int64
		nFailed  atomic.Int64
		mu       sync.Mutex
		sum      float64
		firstErr error
	)
	g := newGroups(s, &o)
	started := time.Now()
	line := func() string {
		d := nDone.Load()
		mu.Lock()
		mean := 0.0
		if d > 0 {
			mean = sum / float64(d)
		}
		mu.Unlock()
		done := int64(res.Resumed) + d
		rate, eta := progress.Rate(done, int64(res.Resumed), int64(total), started)
		return fmt.Sprintf("rollout: %d/%d episodes (%d resumed, %d failed), %d in flight, mean reward %.3f, %.2f episodes/s, ETA %s",
			done, total, res.Resumed, nFailed.Load(), g.inFlight.Load(), mean, rate, eta)
	}
	ticker := progress.Start(o.Progress, o.ProgressEvery, line)

	// finish journals the rows of members that ended (a tree group's in
	// one write: the whole tree or none of it) and counts the members
	// that failed.
	finish := func(t Task, todo []int, rows []Row, err error) {
		if err == nil {
			vs := make([]any, len(rows))
			for i, r := range rows {
				vs[i] = r
			}
			err = j.Append(vs...)
		}
		if err != nil {
			if len(todo) == 1 {
				o.Logger.Error("rollout: episode failed", "task", t.ID, "sample", todo[0], "err", err)
				err = fmt.Errorf("task %s sample %d: %w", t.ID, todo[0], err)
			} else {
				o.Logger.Error("rollout: group failed", "task", t.ID, "err", err)
				err = fmt.Errorf("task %s: %w", t.ID, err)
			}
			nFailed.Add(int64(len(todo)))
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
			return
		}
		mu.Lock()
		for _, r := range rows {
			sum += r.Reward
			stats.add(outcomeOf(r))
		}
		mu.Unlock()
		nDone.Add(int64(len(rows)))
	}
	for _, t := range tasks {
		if ctx.Err() != nil {
			break
		}
		var todo []int
		for i := range o.GroupSize {
			if !done[key{t.ID, i}] {
				todo = append(todo, i)
			}
		}
		if len(todo) == 0 {
			continue
		}
		start := g.start
		if o.Queue != nil {
			start = g.dispatch
		}
		if !start(ctx, t, todo, finish) {
			break
		}
	}
	g.wg.Wait()
	ticker.Stop() // the last line
	cerr := j.Close()
	res.Done, res.Failed = int(nDone.Load()), int(nFailed.Load())
	res.Summary = stats.summary()
	res.Workers = g.workers
	var serr error
	if b, err := json.MarshalIndent(res.Summary, "", "  "); err == nil {
		// The summary is recomputed from the journal by any rerun, so a
		// power loss may take it: no fsync.
		serr = atomicfile.WriteFile(filepath.Join(dir, SummaryFile), append(b, '\n'), &atomicfile.Options{NoSync: true})
	} else {
		serr = err
	}
	if err := errors.Join(cerr, serr, ctx.Err()); err != nil {
		return res, err
	}
	if firstErr != nil {
		return res, fmt.Errorf("rollout: %d episodes failed (rerun to retry them), first: %w", res.Failed, firstErr)
	}
	return res, nil
}

// openGroup resets the task's world once (the root session) and forks the
// root for each sample to run, so every member starts from the same state
// and the same prompt; the root is closed once forked. It returns each
// member's session and first messages, the world and its encoded tools.
//
// A real environment (backend "real:…") holds state a fork cannot copy, so
// there each member gets its own reset of the same task (the root is the
// first), with no fork parent, and its prompt shows its own initial
// observation.
func openGroup(ctx context.Context, s Simulator, t Task, todo []int) ([]*sim.Reply, [][]Message, *world.Spec, []byte, error) {
	spec, err := s.World(ctx, t.World)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	tools, err := agentToolsJSON(spec)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	create := func() (*sim.Reply, error) {
		return s.Create(ctx, sim.CreateRequest{WorldID: t.World, Seed: t.Seed, Labels: map[string]string{"rollout_task": t.ID}})
	}
	root, err := create()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	real := strings.HasPrefix(root.Info.Backend, "real:")
	forks := make([]*sim.Reply, 0, len(todo))
	firsts := make([][]Message, 0, len(todo))
	if !real {
		defer s.Delete(context.WithoutCancel(ctx), root.SessionID)
	}
	for n, i := range todo {
		var f *sim.Reply
		var err error
		switch {
		case real && n == 0:
			f = root
		case real:
			f, err = create()
		default:
			f, err = s.Fork(ctx, root.SessionID, sim.ForkRequest{Labels: map[string]string{"rollout_sample": fmt.Sprint(i)}})
		}
		if err != nil {
			for _, g := range forks {
				_ = s.Delete(context.WithoutCancel(ctx), g.SessionID)
			}
			return nil, nil, nil, nil, err
		}
		obs := root.Observation
		if real {
			obs = f.Observation
		} else if f.Info.Parent == "" {
			f.Info.Parent = root.SessionID
		}
		forks = append(forks, f)
		firsts = append(firsts, firstMessages(spec, t, obs))
	}
	return forks, firsts, spec, tools, nil
}

// journalRow is what a rerun reads of a journal line.
type journalRow struct {
	outcome
	SampleIdx int `json:"sample_idx"`
}

// readJournal returns the episodes a journal holds and adds their rows
// to stats ([journal.Rows]: a torn last row is dropped and run again).
func readJournal(path string, stats *summarizer) (map[key]bool, error) {
	done := map[key]bool{}
	err := journal.Rows(path, nil, func(r *journalRow, _ []byte, _ int64) error {
		done[key{r.GroupID, r.SampleIdx}] = true
		stats.add(r.outcome)
		return nil
	})
	return done, err
}
