package worldgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/mcpworld"
	"github.com/agentworld/agentworld/internal/searchindex"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

// prove runs a task's remaining rungs: initial state, answerable
// (fiction), the reference in simulation, the trivial agents.
func (r *run) prove(ctx context.Context, c *candidate, t *library.TaskEntry, ix *searchindex.Index, steps *atomic.Int64) error {
	init := world.Ending{Final: c.spec.InitialState, Observations: []string{c.spec.InitialState}}
	if c.spec.Facts != nil {
		init.Final += "\n" + c.spec.Facts.Render()
		init.Observations = []string{init.Final}
	}
	if ok, _ := t.Check.Decide(init); ok {
		return reject(RungInitial, "the initial state already meets the check")
	}
	if ix != nil && t.Check.Answer != nil {
		if err := answerable(ix, t, c.support[t.ID]); err != nil {
			return err
		}
	}
	spec := library.TaskSpec(c.spec, t)
	// Replays run under the world's own name, so the ledger of a fictional
	// world gathers every task's replays: `world check --all --ledger
	// LIB/generate/ledger` then reports the world's contradiction rate.
	spec.Name = c.spec.Name
	m := sim.New(&sim.Options{
		SuccessJudge: r.o.SuccessJudge,
		// The tool-call check first, as serve installs it: a call that
		// breaks its tool's schema is refused there before any model
		// sees it, so it must not pass here on a lenient world model.
		Hooks:    []sim.StepHook{mcpworld.NewToolCalls(), r.ledger, r.retrieval},
		Worlds:   map[string]*world.Spec{spec.Name: spec},
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(r.o.WorldModel, &sim.ModelOptions{MaxTokens: 4096})},
	})
	defer m.Close(context.WithoutCancel(ctx))
	n := r.o.Replays
	// replay runs the agents' action lists at once, each in its own
	// session (bounded across the run by Options.Episodes), and returns
	// which passed, by index.
	replay := func(agents [][]json.RawMessage, seed0 int64) ([]bool, error) {
		passed := make([]bool, len(agents))
		errs := make([]error, len(agents))
		var wg sync.WaitGroup
		for k, acts := range agents {
			wg.Go(func() {
				passed[k], errs[k] = r.episode(ctx, m, spec, acts, seed0+int64(k), steps)
			})
		}
		wg.Wait()
		return passed, errors.Join(errs...)
	}
	refs := make([][]json.RawMessage, n)
	for k := range refs {
		refs[k] = t.Reference
	}
	got, err := replay(refs, 0)
	if err != nil {
		return err
	}
	if pass := countTrue(got); pass < n-1 {
		return reject(RungRef, "the reference solution passed in %d of %d replays (need %d)", pass, n, n-1)
	}
	// the no-op agent's n replays, then the random agent's n, all at once
	rng := rand.New(rand.NewPCG(uint64(r.o.Seed), uint64(len(t.ID))))
	trivial := make([][]json.RawMessage, 2*n)
	for k := range n {
		trivial[k] = []json.RawMessage{noopAction(spec.Domain)}
		trivial[n+k] = randomAgent(spec, rng)
	}
	if got, err = replay(trivial, 100); err != nil {
		return err
	}
	for k, ok := range got {
		if !ok {
			continue
		}
		if k < n {
			return reject(RungTrivial, "a no-op agent passed (replay %d of %d)", k+1, n)
		}
		return reject(RungTrivial, "a random agent passed (replay %d of %d)", k-n+1, n)
	}
	return nil
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// episode plays actions in a fresh session of spec (ending it if they do
// not) and reports whether the success rule fired.
func (r *run) episode(ctx context.Context, m *sim.Manager, spec *world.Spec, actions []json.RawMessage, seed int64, steps *atomic.Int64) (bool, error) {
	select {
	case r.episodes <- struct{}{}:
		defer func() { <-r.episodes }()
	case <-ctx.Done():
		return false, ctx.Err()
	}
	rep, err := m.Create(ctx, sim.CreateRequest{WorldID: spec.Name, Seed: &seed})
	if err != nil {
		return false, err
	}
	defer m.Delete(context.WithoutCancel(ctx), rep.SessionID)
	acts := append(slices.Clone(actions), noopAction(spec.Domain))
	for turn, a := range acts {
		res, err := m.Step(ctx, rep.SessionID, sim.StepRequest{Action: a, Turn: turn + 1})
		if err != nil {
			if errors.Is(err, conversation.ErrBadAction) {
				return false, nil
			}
			return false, err
		}
		if res.Info.Backend != "rule" { // an end action answered without the model
			steps.Add(1)
		}
		if res.Terminated || res.Truncated {
			return res.Info.RewardComponents["success"] > 0, nil
		}
	}
	return false, nil
}

// randomAgent makes two random actions and a wrong final answer: tool
// calls of random tools with random arguments their schemas accept
// ([randomArguments]) in tool domains, the world's demonstrated actions
// elsewhere.
func randomAgent(s *world.Spec, rng *rand.Rand) []json.RawMessage {
	var out []json.RawMessage
	for range 2 {
		switch {
		case len(s.ActionSpace.Tools) > 0 && (s.Domain == domain.MCP || s.Domain == domain.Search || s.Domain == domain.SWE):
			t := s.ActionSpace.Tools[rng.IntN(len(s.ActionSpace.Tools))]
			b, _ := json.Marshal(map[string]any{"name": t.Name, "arguments": randomArguments(t.InputSchema, rng)})
			out = append(out, b)
		case len(s.Demonstrations) > 0:
			b, _ := json.Marshal(s.Demonstrations[rng.IntN(len(s.Demonstrations))].Action)
			out = append(out, b)
		}
	}
	if s.Domain == domain.MCP || s.Domain == domain.Search || s.Domain == domain.SWE {
		out = append(out, json.RawMessage(fmt.Sprintf(`"I could not find it (%d)."`, rng.IntN(1000))))
	}
	return out
}
