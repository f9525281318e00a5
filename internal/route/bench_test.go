package route

import (
	"container/list"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The routing benchmark simulates an RL rollout fleet against 4 replicas
// whose prefix caches are LRUs of 16-token blocks, each holding a quarter of
// the peak live working set, and compares the cached-token ratio and load
// balance of round-robin, a perfect sticky router (every session pinned to
// the replica with the fewest live sessions) and this package's router.
//
// Workload: 512 sessions, 64 live at a time (a finished session is
// replaced at once), 20-40 turns each, 2,048-token system prompts shared per
// tenant, 512-token turns (an action and a screen-sized observation). One hot tenant owns half of all sessions; the
// other half spreads over 15 tenants.

const (
	blockTokens = 16
	replicas    = 4
)

type lru struct {
	cap   int
	ll    *list.List
	items map[uint64]*list.Element
}

func newLRU(capacity int) *lru {
	return &lru{cap: capacity, ll: list.New(), items: map[uint64]*list.Element{}}
}

// serve returns how many leading blocks were cached, then caches them all.
func (c *lru) serve(blocks []uint64) int {
	hit := 0
	for _, b := range blocks {
		if _, ok := c.items[b]; !ok {
			break
		}
		hit++
	}
	for _, b := range blocks {
		if e, ok := c.items[b]; ok {
			c.ll.MoveToFront(e)
			continue
		}
		c.items[b] = c.ll.PushFront(b)
		if c.ll.Len() > c.cap {
			old := c.ll.Back()
			c.ll.Remove(old)
			delete(c.items, old.Value.(uint64))
		}
	}
	return hit
}

type simSession struct {
	id, tenant, turns, done int
	chain                   []uint64 // block hashes so far
}

func mix(a, b uint64) uint64 {
	x := a*0x9E3779B97F4A7C15 ^ (b + 0x632BE59BD9B4E019 + (a << 6) + (a >> 2))
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	return x ^ x>>29
}

const sysBlocks, turnBlocks = 2048 / blockTokens, 512 / blockTokens

// blocks lists the chained block hashes of a session's request at turn k
// (system prompt + k turns), extending the session's chain: a block's hash
// covers its whole prefix, so equal hashes mean equal prefixes.
func (s *simSession) blocks(k int) []uint64 {
	if len(s.chain) == 0 {
		h := uint64(s.tenant + 1)
		for i := 0; i < sysBlocks; i++ {
			h = mix(h, uint64(i))
			s.chain = append(s.chain, h)
		}
	}
	for len(s.chain) < sysBlocks+k*turnBlocks {
		prev := s.chain[len(s.chain)-1]
		if len(s.chain) == sysBlocks {
			prev = mix(prev, uint64(s.id)<<20)
		}
		s.chain = append(s.chain, mix(prev, uint64(len(s.chain))))
	}
	return s.chain[:sysBlocks+k*turnBlocks]
}

type policy interface {
	route(s *simSession) int
	end(s *simSession)
}

type roundRobin struct{ n int }

func (r *roundRobin) route(*simSession) int { r.n++; return r.n % replicas }
func (r *roundRobin) end(*simSession)       {}

type perfectSticky struct {
	at   map[int]int
	live [replicas]int
}

func (p *perfectSticky) route(s *simSession) int {
	if r, ok := p.at[s.id]; ok {
		return r
	}
	best := 0
	for i := range p.live {
		if p.live[i] < p.live[best] {
			best = i
		}
	}
	p.at[s.id] = best
	p.live[best]++
	return best
}

func (p *perfectSticky) end(s *simSession) { p.live[p.at[s.id]]--; delete(p.at, s.id) }

type ours struct{ r *Router }

func (o ours) route(s *simSession) int {
	i, err := o.r.Pick(fmt.Sprint("session-", s.id))
	if err != nil {
		panic(err)
	}
	return i
}

func (o ours) end(s *simSession) { o.r.Release(fmt.Sprint("session-", s.id)) }

type outcome struct {
	cached, total int64
	load          [replicas]int64
}

func (o outcome) ratio() float64 { return float64(o.cached) / float64(o.total) }

func (o outcome) maxMin() float64 {
	lo, hi := o.load[0], o.load[0]
	for _, l := range o.load {
		lo, hi = min(lo, l), max(hi, l)
	}
	return float64(hi) / float64(lo)
}

// runFleet plays the workload through a policy; capacity 0 only measures
// the peak live working set (in blocks) and returns it in cached.
func runFleet(p policy, capacity int, seed uint64) outcome {
	const total, live = 512, 64
	rng := rand.New(rand.NewPCG(seed, 7))
	var caches [replicas]*lru
	for i := range caches {
		caches[i] = newLRU(max(capacity, 1))
	}
	next := 0
	newSession := func() *simSession {
		s := &simSession{id: next, turns: 20 + rng.IntN(21)}
		if rng.IntN(2) == 0 {
			s.tenant = 0
		} else {
			s.tenant = 1 + rng.IntN(15)
		}
		next++
		return s
	}
	active := make([]*simSession, 0, live)
	for len(active) < live {
		active = append(active, newSession())
	}
	var out outcome
	peak := 0
	for len(active) > 0 {
		if capacity == 0 { // live blocks: each tenant's prompt once, each session's turns
			tenants := map[int]bool{}
			n := 0
			for _, s := range active {
				tenants[s.tenant] = true
				n += (s.done + 1) * turnBlocks
			}
			peak = max(peak, n+len(tenants)*sysBlocks)
		}
		rng.Shuffle(len(active), func(i, j int) { active[i], active[j] = active[j], active[i] })
		kept := active[:0]
		for _, s := range active {
			s.done++
			bl := s.blocks(s.done)
			r := p.route(s)
			out.load[r]++
			out.total += int64(len(bl)) * blockTokens
			if capacity > 0 {
				out.cached += int64(caches[r].serve(bl)) * blockTokens
			}
			if s.done < s.turns {
				kept = append(kept, s)
				continue
			}
			p.end(s)
			if next < total {
				kept = append(kept, newSession())
			}
		}
		active = kept
	}
	if capacity == 0 {
		out.cached = int64(peak)
	}
	return out
}

func BenchmarkRoutingPrefixCache(b *testing.B) {
	ws := int(runFleet(&roundRobin{}, 0, 1).cached)
	capacity := ws / replicas
	var rr, st, ou outcome
	for i := 0; i < b.N; i++ {
		rr = runFleet(&roundRobin{}, capacity, 1)
		st = runFleet(&perfectSticky{at: map[int]int{}}, capacity, 1)
		clock := time.Unix(0, 0)
		var reps []Replica
		for j := 0; j < replicas; j++ {
			reps = append(reps, Replica{Name: fmt.Sprint("replica-", j)})
		}
		ou = runFleet(ours{New(reps, &Options{Now: func() time.Time { return clock }})}, capacity, 1)
	}
	b.ReportMetric(ou.ratio()/rr.ratio(), "x_roundrobin")
	b.ReportMetric(ou.ratio()/st.ratio(), "x_perfect_sticky")
	b.ReportMetric(ou.maxMin(), "maxmin_load")
	b.Logf("working set %d blocks, cache %d blocks per replica", ws, capacity)
	b.Logf("cached-token ratio: round-robin %.3f, perfect sticky %.3f, router %.3f", rr.ratio(), st.ratio(), ou.ratio())
	b.Logf("router/round-robin %.2fx (goal >= 2), router/perfect-sticky %.3fx (goal >= 0.9), router max/min load %.3f (goal <= 1.5), loads %v",
		ou.ratio()/rr.ratio(), ou.ratio()/st.ratio(), ou.maxMin(), ou.load)
}
