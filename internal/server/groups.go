package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/agentworld/agentworld/internal/sim"
)

// maxGroupRoots bounds the group roots remembered at once; the oldest key
// is forgotten (and its root closed) beyond it.
const maxGroupRoots = 4096

// groupRoots hands out forks of one cached root session per reset
// group_key, so a trainer that calls reset G times for a GRPO group gets
// G sessions with the same initial state and history. A root is private
// (sim.CreateRequest.Private): no reply names it (members name
// sim.PrivateRootName of it as their parent) and no client can step,
// fork, read or delete it, so every member starts from the world's
// initial state whatever other clients do. The zero value is ready to
// use.
type groupRoots struct {
	mu    sync.Mutex
	roots map[string]*groupRoot
	order []string
}

type groupRoot struct {
	mu sync.Mutex // serializes the root's creation and its forks
	id string
}

// groupCacheKey ties a group key to what the reset asks for, so one key
// reused with another world or seed does not fork the wrong root.
func groupCacheKey(key string, c sim.CreateRequest) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %q ", key, c.WorldID, c.Model, c.Backend)
	if c.Seed != nil {
		fmt.Fprintf(h, "seed=%d ", *c.Seed)
	}
	if c.World != nil {
		fmt.Fprintf(h, "%p", c.World) // an inline spec: each reset is its own
	}
	return string(h.Sum(nil))
}

// fork returns a new fork of the group's root, creating the root on the
// first reset of the key or again when the old one expired.
func (g *groupRoots) fork(ctx context.Context, m *sim.Manager, key string, c sim.CreateRequest) (*sim.Reply, error) {
	ck := groupCacheKey(key, c)
	g.mu.Lock()
	if g.roots == nil {
		g.roots = map[string]*groupRoot{}
	}
	r := g.roots[ck]
	if r == nil {
		r = &groupRoot{}
		g.roots[ck] = r
		g.order = append(g.order, ck)
		for len(g.order) > maxGroupRoots {
			old := g.roots[g.order[0]]
			delete(g.roots, g.order[0])
			g.order = g.order[1:]
			go func() { // the root is closed off the request path
				old.mu.Lock()
				defer old.mu.Unlock()
				if old.id != "" {
					_ = m.DeletePrivate(context.Background(), old.id)
				}
			}()
		}
	}
	g.mu.Unlock()

	r.mu.Lock()
	defer r.mu.Unlock()
	root := c
	root.ID, root.Labels, root.Private = "", map[string]string{"group_key": key}, true
	for attempt := 0; ; attempt++ {
		if r.id == "" {
			rep, err := m.Create(ctx, root)
			if err != nil {
				return nil, err
			}
			r.id = rep.SessionID
		}
		f, err := m.ForkPrivate(ctx, r.id, sim.ForkRequest{Labels: c.Labels})
		if attempt == 0 && (errors.Is(err, sim.ErrUnknownSession) || errors.Is(err, sim.ErrSessionClosed)) {
			r.id = "" // the root expired: start the group's root anew
			continue
		}
		return f, err
	}
}
