package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
//
// In a cluster (shared set) a group's resets land on any node, so its root
// is the cluster's: shared names it (and makes it once), every node forks
// it from the store, and roots are forgotten when the shared record
// expires, not by maxGroupRoots. A reset of an inline spec is a group of
// its own and stays local.
type groupRoots struct {
	mu    sync.Mutex
	roots map[string]*groupRoot
	order []string

	shared GroupRegistry
	// busy serializes this node's resets of one shared group, so one of
	// them asks the cluster to make the root and the others fork it.
	busy map[string]*busyGroup
}

// GroupRegistry names the root session of each reset group for every node
// of a cluster (*jetstore.Store): GroupRoot returns the group's root, made
// once with create when the cluster has none or only stale (a root this
// node could not fork); a root create made that another node's beat is
// given to discard.
type GroupRegistry interface {
	GroupRoot(ctx context.Context, key, stale string, create func(context.Context) (string, error), discard func(id string)) (string, error)
}

type busyGroup struct {
	mu    sync.Mutex
	users int // guarded by groupRoots.mu
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
	if g.shared != nil && c.World == nil {
		return g.forkShared(ctx, m, key, hex.EncodeToString([]byte(ck)), c)
	}
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
	root := rootRequest(key, c)
	for attempt := 0; ; attempt++ {
		if r.id == "" {
			rep, err := m.Create(ctx, root)
			if err != nil {
				return nil, err
			}
			r.id = rep.SessionID
		}
		f, err := m.ForkPrivate(ctx, r.id, sim.ForkRequest{Labels: c.Labels})
		if attempt == 0 && rootGone(err) {
			r.id = "" // the root expired: start the group's root anew
			continue
		}
		return f, err
	}
}

// rootGone reports a fork that failed because the group's root is gone.
func rootGone(err error) bool {
	return errors.Is(err, sim.ErrUnknownSession) || errors.Is(err, sim.ErrSessionClosed)
}

// rootRequest is the create request of the root of group key for resets
// asking c.
func rootRequest(key string, c sim.CreateRequest) sim.CreateRequest {
	root := c
	root.ID, root.Labels, root.Private = "", map[string]string{"group_key": key}, true
	return root
}

// forkShared is fork with the cluster's root of the group (ck its cache
// key, hex-encoded): the root is made here only when the cluster has
// none, and forked from the store wherever it was made.
func (g *groupRoots) forkShared(ctx context.Context, m *sim.Manager, key, ck string, c sim.CreateRequest) (*sim.Reply, error) {
	g.mu.Lock()
	if g.busy == nil {
		g.busy = map[string]*busyGroup{}
	}
	b := g.busy[ck]
	if b == nil {
		b = &busyGroup{}
		g.busy[ck] = b
	}
	b.users++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		if b.users--; b.users == 0 {
			delete(g.busy, ck)
		}
		g.mu.Unlock()
	}()
	b.mu.Lock()
	defer b.mu.Unlock()

	create := func(ctx context.Context) (string, error) {
		rep, err := m.Create(ctx, rootRequest(key, c))
		if err != nil {
			return "", err
		}
		return rep.SessionID, nil
	}
	discard := func(id string) { _ = m.DeletePrivate(context.WithoutCancel(ctx), id) }
	stale := ""
	for attempt := 0; ; attempt++ {
		id, err := g.shared.GroupRoot(ctx, ck, stale, create, discard)
		if err != nil {
			return nil, err
		}
		f, err := m.ForkPrivate(ctx, id, sim.ForkRequest{Labels: c.Labels})
		if attempt == 0 && rootGone(err) {
			stale = id // gone from the store: the group starts a new root
			continue
		}
		return f, err
	}
}
