package jetstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/sim"
)

// Reset groups share one root session across the cluster. A server hands
// the resets of one OpenEnv group_key forks of one private root session
// (internal/server), so that a GRPO group's members start from the same
// state, share their perturbation draws and their model affinity. With
// several nodes the group's resets land on any of them, so the root is
// recorded in the groups bucket (DefaultGroupsBucket), key by key:
//
//   - the first node to reset a group claims its key with a key-value
//     Create holding its name and no root, makes the root and records it
//     with an Update at the claim's revision;
//   - a node that finds a root recorded forks it: the root is never
//     stepped, so its transcript in the stream is all a fork needs, and
//     any node loads it (also after its maker died);
//   - a node that finds a claim waits for the root while the claiming
//     node's lease lives, and takes the claim over with a compare-and-set
//     when the node died (or the claim is older than maxClaimAge): a maker
//     whose Update then fails discards its root and forks the winner's.
//
// So every root is made once, before any member forks it, whatever the
// order of the resets. The bucket is created by the first reset of a
// group on any node (lazy.go). Keys expire Options.GroupTTL after their last
// write (the bucket's max age); a reset after that starts a new root.

// Defaults of [Options] for reset groups.
const (
	DefaultGroupsBucket = "agentworld_groups"
	// DefaultGroupTTL is how long a reset group keeps its root: far longer
	// than one GRPO group's resets take.
	DefaultGroupTTL = time.Hour
)

// maxClaimAge is how long a claim of a live node is waited for: a node
// whose root creation hangs (or whose failed claim could not be removed)
// holds its group up for no longer.
const maxClaimAge = 2 * time.Minute

// groupRecord is a reset group's entry in the groups bucket.
type groupRecord struct {
	// Node claimed the group, or made its root.
	Node string `json:"node"`
	// Claim is the claiming call's own token, so a node tells a claim
	// it is making from one a call of its (or of its previous process)
	// left behind.
	Claim string `json:"claim"`
	// Root is the group's root session; "" while Node makes it.
	Root string `json:"root,omitempty"`
}

func newClaimToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// GroupRoot returns the root session of reset group key (a key-value
// key: letters, digits, '-', '_', '='), the same on every node while the
// group's entry lives. When the cluster has none, or has stale (a root the
// caller could not fork), this node claims the group, makes its root with
// create and records it; another node's claim is waited for while that
// node lives. If another node records a root first, the one create made is
// given to discard and the other's is returned. It needs a Node.
func (s *Store) GroupRoot(ctx context.Context, key, stale string, create func(context.Context) (string, error), discard func(id string)) (string, error) {
	if s.o.Node == "" {
		return "", errors.New("reset groups across the cluster need a node name")
	}
	token := newClaimToken()
	s.mu.Lock()
	s.claims[token] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.claims, token)
		s.mu.Unlock()
	}()
	claim, _ := json.Marshal(groupRecord{Node: s.o.Node, Claim: token})
	groups, err := s.groupsBucket(ctx)
	if err != nil {
		return "", fmt.Errorf("reset group %s: %w", key, err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		e, err := s.lastFromLeader(ctx, s.o.GroupsBucket, key)
		if err != nil { // no leader, or none answered in time
			return "", fmt.Errorf("%w: reset group %s: %w", sim.ErrStoreUnavailable, key, err)
		}
		var rec groupRecord
		found := e.seq != 0 && !e.deleted
		if found && json.Unmarshal(e.data, &rec) != nil {
			rec = groupRecord{} // unreadable: claimed over like a dead node's
		}
		var rev uint64
		switch {
		case e.seq == 0:
			rev, err = groups.Create(ctx, key, claim)
		case found && rec.Root != "" && rec.Root != stale:
			return rec.Root, nil
		case found && rec.Root == "":
			live, err := s.claimLives(ctx, key, rec, e.at)
			if err != nil {
				return "", err
			}
			if live {
				if err := s.waitGroup(ctx, groups, key, e.seq); err != nil {
					return "", err
				}
				continue
			}
			fallthrough
		default: // deleted, a stale root, a dead node's claim
			rev, err = groups.Update(ctx, key, claim, e.seq)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSequence(err) {
			continue // another node wrote first: read what it wrote
		}
		if err != nil {
			return "", unavailable(fmt.Errorf("claim reset group %s: %w", key, err))
		}
		id, err := s.makeRoot(ctx, groups, key, token, rev, create, discard)
		if errors.Is(err, ErrClaimLost) {
			continue
		}
		return id, err
	}
}

// claimLives reports whether rec, a claim of group key stored at at, is
// still to be waited for: its node lives (for this node's own claims,
// the claiming call is still making the root) and it is younger than
// maxClaimAge.
func (s *Store) claimLives(ctx context.Context, key string, rec groupRecord, at time.Time) (bool, error) {
	if rec.Node == "" || time.Since(at) > maxClaimAge {
		return false, nil
	}
	if rec.Node == s.o.Node {
		s.mu.Lock()
		_, ok := s.claims[rec.Claim]
		s.mu.Unlock()
		return ok, nil
	}
	// read from the bucket: this node's watch may not yet have seen a
	// node that shut down delete its key
	_, alive, err := s.readNode(ctx, rec.Node)
	if err != nil {
		return false, unavailable(fmt.Errorf("reset group %s: %w", key, err))
	}
	return alive, nil
}

// makeRoot makes the root of group key, which the call holding token
// claimed at revision rev, and records it. ErrClaimLost: another node
// took the claim over meanwhile (its root is the group's; this one was
// discarded).
func (s *Store) makeRoot(ctx context.Context, groups jetstream.KeyValue, key, token string, rev uint64, create func(context.Context) (string, error), discard func(string)) (string, error) {
	id, err := create(ctx)
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.SetupTimeout)
	defer cancel()
	if err != nil {
		// let the next reset claim the group at once rather than after
		// maxClaimAge
		_ = groups.Delete(bg, key, jetstream.LastRevision(rev))
		return "", err
	}
	b, _ := json.Marshal(groupRecord{Node: s.o.Node, Claim: token, Root: id})
	_, err = groups.Update(bg, key, b, rev)
	if err == nil {
		return id, nil
	}
	discard(id)
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSequence(err) {
		return "", fmt.Errorf("reset group %s: %w", key, ErrClaimLost)
	}
	_ = groups.Delete(bg, key, jetstream.LastRevision(rev))
	return "", unavailable(fmt.Errorf("record reset group %s's root: %w", key, err))
}

// waitGroup waits until group key's entry is no longer at revision rev,
// or for a lease at most (the claiming node may have died meanwhile).
func (s *Store) waitGroup(ctx context.Context, groups jetstream.KeyValue, key string, rev uint64) error {
	if s.onWait != nil {
		s.onWait(key)
	}
	t := time.NewTimer(s.o.Lease)
	defer t.Stop()
	w, err := groups.Watch(ctx, key)
	if err != nil {
		// no watch: look again after the wait
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case e, ok := <-w.Updates():
			// nil ends the initial values; a revision not after rev
			// came from a replica behind the leader
			if !ok || e != nil && e.Revision() > rev {
				return nil
			}
		}
	}
}
