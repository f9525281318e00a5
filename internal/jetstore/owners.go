package jetstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/sim"
)

// Owner is a session's owner record.
type Owner struct {
	Node string `json:"node"`
	// Addr is the node's HTTP base URL.
	Addr string `json:"addr,omitempty"`
	// Backend is the session's backend: a real environment's sessions
	// cannot move to another node.
	Backend string `json:"backend,omitempty"`
}

// Lease is a session's owner as [Store.Owner] found it.
type Lease struct {
	Owner
	// Revision is the owner record's, for [Store.Claim]; 0 when the
	// session has none.
	Revision uint64
	// Alive reports that the owner's node lease has not expired; then
	// Addr is the address its heartbeat gives.
	Alive bool
}

// ErrClaimLost: another node claimed the session first.
var ErrClaimLost = errors.New("another node claimed the session first")

// maxOthers bounds the owner records of other nodes' sessions a store
// keeps; past it, an arbitrary one is dropped for each one added (a
// dropped one costs a key-value read when next routed).
const maxOthers = 1 << 16

// ownership is what a store knows of who owns what, so that routing a
// step needs no key-value read (guarded by Store.mu):
//
//   - mine: the sessions this node created or claimed. No other node can
//     claim one while this node's lease lives, and it lives at least
//     Lease after the start of the last heartbeat that succeeded; mine is
//     trusted for two thirds of that (the rest is margin for the other
//     servers' clocks) and emptied when a heartbeat finds that time
//     passed, since the lease may have lapsed and the sessions may have
//     been taken over. A record naming this node that it reads from the
//     bucket when it does not trust mine is confirmed before it is taken
//     for the truth (confirmMine).
//   - others: owner records naming other nodes. A record changes only
//     when its node's lease has expired (a claim), so it is used while
//     its node is seen alive; a forward that fails or is refused drops it
//     ([Store.Forget]).
//   - nodes: each node's address and lease end (its last heartbeat's
//     server time + Lease), from a watch of the nodes bucket; a clean
//     shutdown's delete removes it. A node not known alive here is read
//     from the bucket before anyone calls it dead, and only by a node
//     whose own heartbeats have been succeeding for a while (judge).
type ownership struct {
	beatAt time.Time // local start of the last heartbeat that succeeded
	// upSince is the local start of the first heartbeat of the current
	// run of successful ones; zero after one failed.
	upSince time.Time
	epoch   uint64 // bumped whenever mine is emptied
	mine    map[string]mine
	others  map[string]Lease
	nodes   map[string]nodeLease
}

type mine struct {
	revision uint64
	backend  string
}

type nodeLease struct {
	addr  string
	until time.Time
}

func newOwnership() ownership {
	return ownership{mine: map[string]mine{}, others: map[string]Lease{}, nodes: map[string]nodeLease{}}
}

// trusted is how long after a heartbeat's start this node trusts that
// its lease lives.
func (s *Store) trusted() time.Duration { return s.o.Lease * 2 / 3 }

// leaseTrusted reports whether this node's last successful heartbeat
// started within trusted() of now. With s.mu held.
func (s *Store) leaseTrusted(now time.Time) bool { return now.Sub(s.own.beatAt) < s.trusted() }

// Self is this node's name.
func (s *Store) Self() string { return s.o.Node }

func (s *Store) heartbeat(ctx context.Context) error {
	start := time.Now()
	if _, err := s.nodes.PutString(ctx, s.o.Node, s.o.Addr); err != nil {
		s.mu.Lock()
		s.own.upSince = time.Time{}
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	if s.own.upSince.IsZero() {
		s.own.upSince = start
	}
	if !s.own.beatAt.IsZero() && start.Sub(s.own.beatAt) >= s.trusted() {
		// mine was not trusted for a while: the lease may have lapsed
		// and other nodes taken sessions over
		s.own.mine = map[string]mine{}
		s.own.epoch++
	}
	s.own.beatAt = start
	s.mu.Unlock()
	return nil
}

// beat renews this node's lease every third of it until Close, and
// sooner after a failure (beatRetry), so that the lease outlives a
// leader election of the nodes bucket.
func (s *Store) beat() {
	defer close(s.done)
	period := s.o.Lease / 3
	t := time.NewTimer(period)
	defer t.Stop()
	var failing time.Time // start of the first heartbeat of the current failing run
	for {
		select {
		case <-s.life.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		// under s.life: Close ends a heartbeat in flight rather than wait
		// up to a period for a store that does not answer
		ctx, cancel := context.WithTimeout(s.life, period)
		err := s.heartbeat(ctx)
		cancel()
		if s.life.Err() != nil {
			return // Close ended it
		}
		next := period - time.Since(start)
		switch {
		case err != nil && failing.IsZero():
			failing = start
			s.log.Warn("renew node lease; retrying", "node", s.o.Node, "every", s.beatRetry(), "err", err)
			fallthrough
		case err != nil:
			next = s.beatRetry()
		case !failing.IsZero():
			s.log.Warn("node lease renewed again", "node", s.o.Node, "after", time.Since(failing).Round(time.Millisecond))
			failing = time.Time{}
		}
		t.Reset(max(next, 0))
	}
}

// Close stops the heartbeat and deletes this node's key, so other nodes
// take its sessions over at once instead of after the lease. It does not
// close the connection.
//
// Releasing the lease only saves the other nodes the rest of it, so it is
// best-effort: Close gives the delete releaseTimeout and, when the store
// does not answer (the whole cluster stopping at once leaves the last node
// with no quorum), logs a warning and returns nil; the lease then expires
// by itself. Close never loses a write: every acknowledged append was
// stored before its acknowledgement.
func (s *Store) Close() error {
	s.once.Do(func() {
		if s.stop == nil {
			return
		}
		s.stop() // also ends a heartbeat in flight
		<-s.done
		ctx, cancel := context.WithTimeout(context.Background(), s.releaseTimeout())
		defer cancel()
		// Stopping the watch deletes its consumer on the server, and with
		// no answer waits out nats.go's 5-second request timeout; the
		// server drops an unused ephemeral consumer by itself, so Close
		// waits for it only as long as for the release.
		watchStopped := make(chan struct{})
		if s.watcher != nil {
			go func() {
				_ = s.watcher.Stop()
				<-s.watched
				close(watchStopped)
			}()
		} else {
			close(watchStopped)
		}
		start := time.Now()
		if err := s.nodes.Delete(ctx, s.o.Node); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			s.log.Warn("release node lease at shutdown; other nodes take its sessions over when the lease expires",
				"node", s.o.Node, "lease", s.o.Lease, "waited", time.Since(start).Round(time.Millisecond), "err", err)
		}
		select {
		case <-watchStopped:
		case <-ctx.Done():
		}
	})
	return nil
}

// releaseTimeout bounds Close's delete of this node's key: a second, or
// half the lease when that is shorter (by then most of what releasing it
// would save has passed). An answering store deletes it in milliseconds.
func (s *Store) releaseTimeout() time.Duration { return min(time.Second, s.o.Lease/2) }

// beatRetry is the pause before a heartbeat after a failed one.
func (s *Store) beatRetry() time.Duration { return min(s.o.Lease/10, 250*time.Millisecond) }

// judge reports whether this node may take another node's missing
// heartbeat for its death: its own heartbeats have been succeeding for
// the last judgeAfter. While the nodes bucket elects a leader no node can
// renew its lease and every key expires, the live nodes' too; once it has
// one again, the live nodes put theirs back within a beatRetry or two.
// A node that cannot renew its own lease (or only just can again) does
// not claim anybody's sessions. With s.mu held.
func (s *Store) judge() bool {
	if s.o.Node == "" {
		return true // no lease of its own to go by
	}
	now := time.Now()
	return !s.own.upSince.IsZero() && now.Sub(s.own.upSince) >= s.judgeAfter() && s.leaseTrusted(now)
}

// judgeAfter is how long a node's heartbeats must have been succeeding
// before it judges another node's lease.
func (s *Store) judgeAfter() time.Duration { return min(s.o.Lease/3, time.Second) }

// ErrCannotJudge: this node's own heartbeats are failing (or resumed only
// a moment ago), so another node's missing heartbeat may be the nodes
// bucket's election, not its death.
var ErrCannotJudge = errors.New("this node cannot renew its own lease just now (the cluster may be electing a leader), so it does not take another node's missing lease for its death")

// watchNodes starts following the nodes bucket's heartbeats. Without
// the watch (it could not start) every route reads the bucket instead.
func (s *Store) watchNodes() {
	w, err := s.nodes.WatchAll(context.Background())
	if err != nil {
		s.log.Warn("watch node leases; routing reads them from the bucket instead", "node", s.o.Node, "err", err)
		return
	}
	s.watcher, s.watched = w, make(chan struct{})
	go func() {
		defer close(s.watched)
		for e := range w.Updates() {
			if e == nil {
				continue // the end of the initial values
			}
			s.mu.Lock()
			if e.Operation() == jetstream.KeyValuePut {
				s.own.nodes[e.Key()] = nodeLease{addr: string(e.Value()), until: e.Created().Add(s.o.Lease)}
			} else {
				delete(s.own.nodes, e.Key())
			}
			s.mu.Unlock()
		}
	}()
}

// ownedHere is session id's lease when this node owns it and trusts its
// own lease.
func (s *Store) ownedHere(id string) (Lease, bool) {
	m, ok := s.own.mine[id]
	if !ok || !s.leaseTrusted(time.Now()) {
		return Lease{}, false
	}
	return Lease{Owner: Owner{Node: s.o.Node, Addr: s.o.Addr, Backend: m.backend}, Revision: m.revision, Alive: true}, true
}

// alive reports node's address when its lease is known to live.
func (s *Store) alive(node string) (string, bool) {
	n, ok := s.own.nodes[node]
	if !ok || !time.Now().Before(n.until) {
		return "", false
	}
	return n.addr, true
}

// mark records that this node owns session id at revision, unless mine
// was emptied since epoch (read before the write that made it the owner).
func (s *Store) mark(id string, revision uint64, backend string, epoch uint64) {
	s.mu.Lock()
	if s.own.epoch == epoch {
		s.own.mine[id] = mine{revision: revision, backend: backend}
	}
	s.mu.Unlock()
}

func (s *Store) currentEpoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.own.epoch
}

func (s *Store) putOwner(ctx context.Context, id, backend string) error {
	epoch := s.currentEpoch()
	b, _ := json.Marshal(Owner{Node: s.o.Node, Addr: s.o.Addr, Backend: backend})
	var rev uint64
	err := s.retry(ctx, func(ctx context.Context) (err error) {
		rev, err = s.owners.Put(ctx, key(id), b)
		return err
	})
	if err != nil {
		// a stream electing its leader: the client retries (503)
		return unavailable(fmt.Errorf("record node %s as owner of session %s: %w", s.o.Node, id, err))
	}
	s.mark(id, rev, backend, epoch)
	return nil
}

// Owner looks up session id's owner and whether it is alive. A session
// without an owner record has a zero Lease. It answers from what the
// store knows (see ownership) when it can: a session of this node's, or
// another live node's; an owner it reports dead was read from the
// buckets. A record naming this node, read while this node did not know
// the session its own, is confirmed with the bucket before it is
// believed, and while this node does not trust its own lease the answer is
// ErrLeaseLapsed (marked sim.ErrStoreUnavailable): see confirmMine.
func (s *Store) Owner(ctx context.Context, id string) (Lease, error) {
	s.mu.Lock()
	if l, ok := s.ownedHere(id); ok {
		s.mu.Unlock()
		return l, nil
	}
	if l, ok := s.own.others[id]; ok {
		if addr, ok := s.alive(l.Node); ok {
			s.mu.Unlock()
			l.Alive, l.Addr = true, addr
			return l, nil
		}
	}
	epoch := s.own.epoch
	s.mu.Unlock()

	var e jetstream.KeyValueEntry
	err := s.retry(ctx, func(ctx context.Context) (err error) {
		e, err = s.owners.Get(ctx, key(id))
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Lease{}, nil
	}
	if err != nil {
		return Lease{}, unavailable(fmt.Errorf("owner of session %s: %w", id, err))
	}
	return s.leaseOf(ctx, id, e.Value(), e.Revision(), epoch)
}

// leaseOf is the Lease of session id's owner record value at revision
// rev, read when this store's epoch was epoch.
func (s *Store) leaseOf(ctx context.Context, id string, value []byte, rev, epoch uint64) (Lease, error) {
	var l Lease
	if err := json.Unmarshal(value, &l.Owner); err != nil {
		return Lease{}, fmt.Errorf("owner of session %s: %w", id, err)
	}
	l.Revision = rev
	if l.Node == s.o.Node {
		return s.confirmMine(ctx, id, l, epoch)
	}
	return s.othersLease(ctx, id, l)
}

// othersLease is the Lease of session id's owner record l, which names
// another node.
func (s *Store) othersLease(ctx context.Context, id string, l Lease) (Lease, error) {
	s.mu.Lock()
	s.keepOwner(id, l)
	s.mu.Unlock()
	addr, alive, err := s.nodeAlive(ctx, l.Node)
	if err != nil {
		return Lease{}, err
	}
	if alive {
		l.Alive = true
		if addr != "" {
			l.Addr = addr
		}
	}
	return l, nil
}

// ErrLeaseLapsed: this node has not renewed its own lease for longer
// than it trusts it, so another node may have taken its sessions over.
var ErrLeaseLapsed = errors.New("this node's own lease may have lapsed (it has not renewed it lately), so it does not answer for its sessions until it has")

// confirmMine is the Lease of session id, whose owner record l names this
// node although this node did not know itself its owner (ownedHere): it
// forgot that because its lease may have lapsed (a node paused, or cut
// off, past its lease), and if it did another node may have taken the
// session over. The record may then be stale: a key-value get is answered
// by any replica of the owners bucket, a node's own server first, and a
// node's server paused with it catches up only after it resumes. Taking
// the record for the truth, this node would serve its stale copy of the
// session. So the record is written again with a compare-and-set on its
// revision, which only a current one passes; a stale one is read again
// from the bucket's leader. A node that does not trust its own lease just
// now answers ErrLeaseLapsed (store unavailable: the client retries),
// as its heartbeat renews it in a moment or the session moves.
func (s *Store) confirmMine(ctx context.Context, id string, l Lease, epoch uint64) (Lease, error) {
	for try := 0; ; try++ {
		s.mu.Lock()
		trusted := s.leaseTrusted(time.Now())
		s.mu.Unlock()
		if !trusted {
			return Lease{}, fmt.Errorf("session %s: %w: %w", id, sim.ErrStoreUnavailable, ErrLeaseLapsed)
		}
		b, _ := json.Marshal(Owner{Node: s.o.Node, Addr: s.o.Addr, Backend: l.Backend})
		var rev uint64
		err := s.retry(ctx, func(ctx context.Context) (err error) {
			rev, err = s.owners.Update(ctx, key(id), b, l.Revision)
			return err
		})
		if err == nil {
			s.mark(id, rev, l.Backend, epoch)
			l.Revision, l.Addr, l.Alive = rev, s.o.Addr, true
			return l, nil
		}
		// A retried attempt whose earlier one landed finds the record
		// changed too: the leader's record names this node, at the
		// revision that attempt wrote, and the next try passes.
		switch {
		case !isWrongLastSequence(err):
			return Lease{}, unavailable(fmt.Errorf("confirm node %s as owner of session %s: %w", s.o.Node, id, err))
		case try == 1:
			return Lease{}, fmt.Errorf("confirm node %s as owner of session %s: %w: its owner record keeps changing: %w", s.o.Node, id, sim.ErrStoreUnavailable, err)
		}
		e, err := s.lastFromLeader(ctx, s.o.OwnersBucket, key(id))
		switch {
		case err != nil:
			return Lease{}, unavailable(fmt.Errorf("owner of session %s from the leader: %w", id, err))
		case e.seq == 0 || e.deleted:
			return Lease{}, nil
		}
		l = Lease{Revision: e.seq}
		if err := json.Unmarshal(e.data, &l.Owner); err != nil {
			return Lease{}, fmt.Errorf("owner of session %s: %w", id, err)
		}
		if l.Node != s.o.Node {
			return s.othersLease(ctx, id, l)
		}
	}
}

// nodeAlive reports whether node's lease lives, and the address its
// heartbeat gives: from the watch of the nodes bucket when that knows it
// alive, else read from the bucket.
func (s *Store) nodeAlive(ctx context.Context, node string) (addr string, alive bool, err error) {
	s.mu.Lock()
	addr, ok := s.alive(node)
	s.mu.Unlock()
	if ok {
		return addr, true, nil
	}
	return s.readNode(ctx, node) // not known alive here: the bucket says
}

// readNode is nodeAlive read from the nodes bucket.
func (s *Store) readNode(ctx context.Context, node string) (addr string, alive bool, err error) {
	var n jetstream.KeyValueEntry
	err = s.retry(ctx, func(ctx context.Context) (err error) {
		n, err = s.nodes.Get(ctx, node)
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		s.mu.Lock()
		judge := s.judge()
		s.mu.Unlock()
		if !judge {
			return "", false, fmt.Errorf("lease of node %s: %w: %w", node, sim.ErrStoreUnavailable, ErrCannotJudge)
		}
		return "", false, nil
	case err != nil:
		return "", false, unavailable(fmt.Errorf("lease of node %s: %w", node, err))
	}
	addr = string(n.Value())
	s.mu.Lock()
	s.own.nodes[node] = nodeLease{addr: addr, until: n.Created().Add(s.o.Lease)}
	s.mu.Unlock()
	return addr, true, nil
}

// keepOwner keeps l, another node's owner record of session id, with s.mu
// held.
func (s *Store) keepOwner(id string, l Lease) {
	if _, ok := s.own.others[id]; !ok && len(s.own.others) >= maxOthers {
		for k := range s.own.others {
			delete(s.own.others, k)
			break
		}
	}
	l.Alive = false
	s.own.others[id] = l
}

// Forget drops what this store knows of session id's owner: its owner
// record and that its node lives. A router calls it when a request it
// forwarded to the owner failed or was refused, so the next one reads
// both from the buckets.
func (s *Store) Forget(id string) {
	s.mu.Lock()
	if l, ok := s.own.others[id]; ok {
		delete(s.own.nodes, l.Node)
		delete(s.own.others, id)
	}
	s.mu.Unlock()
}

// Claim makes this node the owner of session id if its owner record is
// still prev's revision (a compare-and-set; ErrClaimLost otherwise).
func (s *Store) Claim(ctx context.Context, id string, prev Lease) error {
	epoch := s.currentEpoch()
	b, _ := json.Marshal(Owner{Node: s.o.Node, Addr: s.o.Addr, Backend: prev.Backend})
	var rev uint64
	// A retried attempt whose earlier one did land finds the record
	// changed and reports the claim lost; the router then reads the
	// record again and finds this node in it.
	err := s.retry(ctx, func(ctx context.Context) (err error) {
		if prev.Revision == 0 {
			rev, err = s.owners.Create(ctx, key(id), b)
		} else {
			rev, err = s.owners.Update(ctx, key(id), b, prev.Revision)
		}
		return err
	})
	s.mu.Lock()
	delete(s.own.others, id) // taken here, or by someone else: read it again
	s.mu.Unlock()
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSequence(err) {
		return fmt.Errorf("session %s: %w", id, ErrClaimLost)
	}
	if err != nil {
		return unavailable(fmt.Errorf("claim session %s: %w", id, err))
	}
	s.mark(id, rev, prev.Backend, epoch)
	return nil
}
