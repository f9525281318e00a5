package rollout

import (
	"context"
	"errors"
	"sync"

	"github.com/agentworld/agentworld/internal/sim"
)

// runTree runs one tree group: a trunk episode from a fork of the root for
// o.BranchAt policy turns, then one fork of the trunk's session per member
// in todo, each continuing the trunk. It is called holding one episode
// slot (for the trunk), which it gives back before the members take
// theirs. It returns the members' rows, or an error when any failed. A
// trunk that ends before BranchAt is every member's whole episode: the
// members are its copies, on its session.
func runTree(ctx context.Context, s Simulator, t Task, todo []int, o *Options, acquire func() bool, release func(), wg *sync.WaitGroup) ([]Row, error) {
	trunk, err := func() (*episode, error) {
		defer release()
		forks, firsts, spec, tools, err := openGroup(ctx, s, t, []int{-1})
		if err != nil {
			return nil, err
		}
		e := newEpisode(s, o, t, spec, tools, -1, firsts[0], forks[0])
		if err := e.run(ctx, o.BranchAt); err != nil {
			_ = s.Delete(context.WithoutCancel(ctx), e.row.EnvSessionID)
			return nil, err
		}
		return e, nil
	}()
	if err != nil {
		return nil, err
	}
	defer s.Delete(context.WithoutCancel(ctx), trunk.row.EnvSessionID)
	rows := make([]Row, len(todo))
	if trunk.ended() {
		if err := trunk.checkReal(ctx, t.RealWorld); err != nil {
			return nil, err
		}
		for n, i := range todo {
			rows[n] = trunk.branch(i, &sim.Reply{SessionID: trunk.row.EnvSessionID}).result()
			rows[n].ForkParent = trunk.row.ForkParent
		}
		return rows, nil
	}
	var (
		mu   sync.Mutex
		errs []error
		mine sync.WaitGroup
	)
	for n, i := range todo {
		f, err := s.Fork(ctx, trunk.row.EnvSessionID, sim.ForkRequest{})
		if err == nil && !acquire() {
			_ = s.Delete(context.WithoutCancel(ctx), f.SessionID)
			err = ctx.Err()
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			break
		}
		e := trunk.branch(i, f)
		mine.Add(1)
		wg.Go(func() {
			defer mine.Done()
			defer release()
			err := e.run(ctx, 0)
			_ = s.Delete(context.WithoutCancel(ctx), e.row.EnvSessionID)
			if err == nil {
				err = e.checkReal(ctx, t.RealWorld)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			rows[n] = e.result()
		})
	}
	mine.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rows, nil
}
