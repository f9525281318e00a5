package rollout

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// groups runs groups' episodes on a simulator, at most o.MaxInFlight at
// once; wg owns every goroutine it starts.
type groups struct {
	s        Simulator
	o        *Options
	sem      chan struct{}
	inFlight atomic.Int64
	wg       sync.WaitGroup
	// mu guards workers, the episodes each queue worker ran (dispatch).
	mu      sync.Mutex
	workers map[string]int
}

func newGroups(s Simulator, o *Options) *groups {
	return &groups{s: s, o: o, sem: make(chan struct{}, o.MaxInFlight)}
}

// acquire takes an episode slot; false when ctx ended first.
func (g *groups) acquire(ctx context.Context) bool {
	select {
	case g.sem <- struct{}{}:
		g.inFlight.Add(1)
		return true
	case <-ctx.Done():
		return false
	}
}

func (g *groups) release() { <-g.sem; g.inFlight.Add(-1) }

// finishFunc receives the members of a group that ended (rows, err nil)
// or failed (err, rows nil): one member of a group forked at the root, or
// every member of a tree group together.
type finishFunc func(t Task, todo []int, rows []Row, err error)

// start runs the members todo of task t's group, each (or the tree) in
// a goroutine of g.wg holding a slot, and hands each outcome to finish.
// A group forked at the root is opened here, before its members take
// their slots. It returns false when ctx ended before every member
// started; the members not started are not handed to finish.
func (g *groups) start(ctx context.Context, t Task, todo []int, finish finishFunc) bool {
	s, o := g.s, g.o
	acquire := func() bool { return g.acquire(ctx) }
	if o.BranchAt > 0 {
		if !acquire() {
			return false
		}
		g.wg.Go(func() {
			rows, err := runTree(ctx, s, t, todo, o, acquire, g.release, &g.wg)
			if err != nil {
				rows = nil
			}
			finish(t, todo, rows, err)
		})
		return true
	}
	forks, firsts, spec, tools, err := openGroup(ctx, s, t, todo)
	if err != nil {
		finish(t, todo, nil, err)
		return true
	}
	for n, i := range todo {
		if !acquire() {
			// Close the forks no episode will use.
			for _, f := range forks[n:] {
				_ = s.Delete(context.WithoutCancel(ctx), f.SessionID)
			}
			return false
		}
		e := newEpisode(s, o, t, spec, tools, i, firsts[n], forks[n])
		g.wg.Go(func() {
			defer g.release()
			err := e.run(ctx, 0)
			_ = s.Delete(context.WithoutCancel(ctx), e.row.EnvSessionID)
			if err == nil {
				err = e.checkReal(ctx, t.RealWorld)
			}
			if err != nil {
				finish(t, []int{i}, nil, err)
				return
			}
			finish(t, []int{i}, []Row{e.result()}, nil)
		})
	}
	return true
}

// RunGroup runs the members todo (sample indices) of task t's group on s
// as [Run] does, without a journal: one reset forked for each member, or
// with opts.BranchAt a tree. It returns the members' rows in the order of
// todo, or an error when any failed (a tree group's rows come all or
// none, as Run writes them). A work queue's worker runs a run's episodes
// with it.
func RunGroup(ctx context.Context, s Simulator, t Task, todo []int, opts *Options) ([]Row, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.defaults()
	if o.Policy == nil {
		return nil, errors.New("rollout: no policy")
	}
	at := make(map[int]int, len(todo))
	for n, i := range todo {
		at[i] = n
	}
	var (
		mu   sync.Mutex
		rows = make([]Row, len(todo))
		errs []error
	)
	g := newGroups(s, &o)
	started := g.start(ctx, t, todo, func(_ Task, idx []int, got []Row, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		for n, r := range got {
			rows[at[idx[n]]] = r
		}
	})
	g.wg.Wait()
	if !started {
		errs = append(errs, ctx.Err())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rows, nil
}
