// Package route spreads world-model requests over several OpenAI-compatible
// replicas of one model while keeping each simulator session on one
// replica, where its prompt prefix is cached.
//
// Policy: consistent hashing with bounded loads (Mirrokni, Thorup and
// Zadimoghaddam, 2018) applied to session assignments. Each affinity key
// (the session's root id, so forks share their parent's replica) is
// assigned once, by walking a hash ring with virtual nodes from the key's
// hash to the first healthy replica whose number of assigned keys is below
// ceil(Load × (assigned+1) / healthy replicas). The key then sticks to that
// replica until it is idle for StickyTTL, released, or the replica fails:
// a failed request marks the replica down for Cooldown and the key is
// reassigned (failover) and the request retried there. Each replica has a
// bound on requests in flight.
//
// The assignments and loads are this router's own, so in a cluster two
// nodes could place one session differently. A request that names the
// replica its session's previous request went to (worldmodel.WithReplica,
// which the simulator reads from the session's transcript) goes back there
// while it is healthy, whatever the local loads: every node reads the same
// transcript, so the node that takes a session over places it where its
// prefix is cached. Only a session's first request is placed by the ring.
package route

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Replica is one model server.
type Replica struct {
	// Name identifies the replica in logs, metrics and step info (its URL).
	Name string
	C    worldmodel.Completer
	// HealthURL, when set, is probed with GET by the health loop (e.g.
	// BASE/models).
	HealthURL string
}

// Options tunes a Router. The zero value of each field is a usable default.
type Options struct {
	// Load is the bounded-load factor c >= 1; 0 means 1.25.
	Load float64
	// VNodes is the number of ring points per replica; 0 means 100.
	VNodes int
	// MaxInFlight bounds concurrent requests per replica; 0 means 256.
	MaxInFlight int
	// Cooldown keeps a failed replica out of rotation; 0 means 10 seconds.
	Cooldown time.Duration
	// StickyTTL forgets a key's assignment after this long without
	// requests; 0 means 30 minutes.
	StickyTTL time.Duration
	// HealthInterval, when > 0, probes each replica's HealthURL this often.
	HealthInterval time.Duration
	// HTTPClient probes health; nil means a client with a 5 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ErrNoReplica means every replica is down.
var ErrNoReplica = fmt.Errorf("%w: no healthy replica", worldmodel.ErrUnavailable)

// Router is a worldmodel.Completer over replicas.
type Router struct {
	reps []*replica
	ring []point
	// byName finds a replica by the name a request's preference names.
	byName map[string]int
	opts   Options
	log    *slog.Logger

	mu         sync.Mutex
	assigned   map[string]*assignment
	total      int
	lastExpire time.Time

	stop chan struct{}
	done chan struct{}
}

type replica struct {
	Replica
	sem       chan struct{}
	mu        sync.Mutex
	downUntil time.Time
	keys      int // assigned keys
	requests  int64
	failures  int64
	inflight  int
}

type assignment struct {
	rep  int
	last time.Time
}

type point struct {
	hash uint64
	rep  int
}

// New builds a router; call Close to stop its health loop.
func New(replicas []Replica, opts *Options) *Router {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Load < 1 {
		o.Load = 1.25
	}
	if o.VNodes <= 0 {
		o.VNodes = 100
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 256
	}
	if o.Cooldown <= 0 {
		o.Cooldown = 10 * time.Second
	}
	if o.StickyTTL <= 0 {
		o.StickyTTL = 30 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 5 * time.Second}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Router{opts: o, log: log, assigned: map[string]*assignment{}, byName: map[string]int{}}
	for i, rp := range replicas {
		r.byName[rp.Name] = i
		r.reps = append(r.reps, &replica{Replica: rp, sem: make(chan struct{}, o.MaxInFlight)})
		for v := 0; v < o.VNodes; v++ {
			r.ring = append(r.ring, point{hash: hash64(fmt.Sprintf("%s#%d", rp.Name, v)), rep: i})
		}
	}
	sort.Slice(r.ring, func(i, j int) bool { return r.ring[i].hash < r.ring[j].hash })
	if o.HealthInterval > 0 {
		r.stop, r.done = make(chan struct{}), make(chan struct{})
		go r.healthLoop()
	}
	return r
}

func hash64(s string) uint64 {
	h := sha256.Sum256([]byte(s))
	return binary.BigEndian.Uint64(h[:8])
}

// Close stops the health loop.
func (r *Router) Close() {
	if r.stop != nil {
		close(r.stop)
		<-r.done
		r.stop = nil
	}
}

func (r *Router) healthy(i int, now time.Time) bool {
	rp := r.reps[i]
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return !now.Before(rp.downUntil)
}

// Pick returns the replica index for key, assigning it if needed. It is
// the routing decision of Complete, exposed for simulations.
func (r *Router) Pick(key string) (int, error) {
	return r.pick(key, "", -1)
}

// pick assigns key, avoiding replica avoid (a replica that just failed).
// A healthy preferred replica (by name) wins over the key's assignment
// and the ring: the key is assigned to it.
func (r *Router) pick(key, prefer string, avoid int) (int, error) {
	now := r.opts.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked(now)
	a, ok := r.assigned[key]
	if p, named := r.byName[prefer]; named && p != avoid && r.healthy(p, now) {
		switch {
		case ok && a.rep == p:
			a.last = now
			return p, nil
		case ok:
			r.unassignLocked(key, a)
		}
		rp := r.reps[p]
		rp.mu.Lock()
		rp.keys++
		rp.mu.Unlock()
		r.assigned[key] = &assignment{rep: p, last: now}
		r.total++
		return p, nil
	}
	if ok {
		if a.rep != avoid && r.healthy(a.rep, now) {
			a.last = now
			return a.rep, nil
		}
		r.unassignLocked(key, a)
	}
	healthy := 0
	for i := range r.reps {
		if i != avoid && r.healthy(i, now) {
			healthy++
		}
	}
	if healthy == 0 {
		return -1, ErrNoReplica
	}
	capacity := int(math.Ceil(r.opts.Load * float64(r.total+1) / float64(healthy)))
	start := sort.Search(len(r.ring), func(i int) bool { return r.ring[i].hash >= hash64(key) })
	for n := 0; n < len(r.ring); n++ {
		p := r.ring[(start+n)%len(r.ring)]
		if p.rep == avoid || !r.healthy(p.rep, now) {
			continue
		}
		rp := r.reps[p.rep]
		rp.mu.Lock()
		ok := rp.keys < capacity
		if ok {
			rp.keys++
		}
		rp.mu.Unlock()
		if ok {
			r.assigned[key] = &assignment{rep: p.rep, last: now}
			r.total++
			return p.rep, nil
		}
	}
	return -1, ErrNoReplica // unreachable: some healthy replica is below capacity
}

func (r *Router) unassignLocked(key string, a *assignment) {
	delete(r.assigned, key)
	r.total--
	rp := r.reps[a.rep]
	rp.mu.Lock()
	rp.keys--
	rp.mu.Unlock()
}

// expireLocked forgets assignments idle longer than StickyTTL; it scans
// the map at most once per second of clock time.
func (r *Router) expireLocked(now time.Time) {
	if now.Sub(r.lastExpire) < time.Second {
		return
	}
	r.lastExpire = now
	for k, a := range r.assigned {
		if now.Sub(a.last) > r.opts.StickyTTL {
			r.unassignLocked(k, a)
		}
	}
}

// Release forgets a key's assignment (its session ended).
func (r *Router) Release(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.assigned[key]; ok {
		r.unassignLocked(key, a)
	}
}

// keyOf is the request's affinity key: the session set by
// worldmodel.WithAffinity, else the system prompt and first user message.
func keyOf(ctx context.Context, req worldmodel.Request) string {
	if k := worldmodel.Affinity(ctx); k != "" {
		return k
	}
	var b strings.Builder
	for i, m := range req.Messages {
		if i > 1 {
			break
		}
		b.WriteString(m.Role)
		b.WriteString(m.Content)
	}
	return b.String()
}

// Complete implements worldmodel.Completer: it routes the request to its
// key's replica and fails over to another replica when that one is
// unavailable.
func (r *Router) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	key, prefer := keyOf(ctx, req), worldmodel.Replica(ctx)
	avoid := -1
	var lastErr error
	for attempt := 0; attempt < len(r.reps); attempt++ {
		i, err := r.pick(key, prefer, avoid)
		if err != nil {
			if lastErr != nil {
				return nil, fmt.Errorf("%w (last failure: %w)", err, lastErr)
			}
			return nil, err
		}
		rp := r.reps[i]
		select {
		case rp.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		rp.mu.Lock()
		rp.inflight++
		rp.requests++
		rp.mu.Unlock()
		resp, err := rp.C.Complete(ctx, req)
		rp.mu.Lock()
		rp.inflight--
		if err != nil && errors.Is(err, worldmodel.ErrUnavailable) && ctx.Err() == nil {
			rp.failures++
			rp.downUntil = r.opts.Now().Add(r.opts.Cooldown)
		}
		rp.mu.Unlock()
		<-rp.sem
		if err == nil {
			resp.ServedBy = rp.Name
			return resp, nil
		}
		if !errors.Is(err, worldmodel.ErrUnavailable) || ctx.Err() != nil {
			return nil, err
		}
		r.log.Warn("replica failed; failing over", "replica", rp.Name, "err", err)
		lastErr = err
		avoid = i
	}
	return nil, lastErr
}

func (r *Router) healthLoop() {
	defer close(r.done)
	t := time.NewTicker(r.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		for _, rp := range r.reps {
			if rp.HealthURL == "" {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), r.opts.HealthInterval)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rp.HealthURL, nil)
			resp, err := r.opts.HTTPClient.Do(req)
			ok := err == nil && resp.StatusCode < 500
			if resp != nil {
				resp.Body.Close()
			}
			cancel()
			rp.mu.Lock()
			if ok {
				rp.downUntil = time.Time{}
			} else {
				rp.downUntil = r.opts.Now().Add(r.opts.Cooldown)
			}
			rp.mu.Unlock()
		}
	}
}

// Load is one replica's state.
type Load struct {
	Name     string
	Keys     int
	InFlight int
	Requests int64
	Failures int64
	Healthy  bool
}

// Loads reports every replica's state.
func (r *Router) Loads() []Load {
	now := r.opts.Now()
	out := make([]Load, len(r.reps))
	for i, rp := range r.reps {
		rp.mu.Lock()
		out[i] = Load{Name: rp.Name, Keys: rp.keys, InFlight: rp.inflight, Requests: rp.requests, Failures: rp.failures, Healthy: !now.Before(rp.downUntil)}
		rp.mu.Unlock()
	}
	return out
}

// Collector exports per-replica load as Prometheus gauges and counters.
func (r *Router) Collector() prometheus.Collector { return collector{r} }

var (
	descKeys     = prometheus.NewDesc("agentworld_replica_sessions", "Sessions assigned to a replica.", []string{"replica"}, nil)
	descInFlight = prometheus.NewDesc("agentworld_replica_inflight", "Requests in flight on a replica.", []string{"replica"}, nil)
	descRequests = prometheus.NewDesc("agentworld_replica_requests_total", "Requests sent to a replica.", []string{"replica"}, nil)
	descFailures = prometheus.NewDesc("agentworld_replica_failures_total", "Requests a replica failed (after its client's retries).", []string{"replica"}, nil)
	descHealthy  = prometheus.NewDesc("agentworld_replica_healthy", "1 when the replica is in rotation.", []string{"replica"}, nil)
)

type collector struct{ r *Router }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descKeys, descInFlight, descRequests, descFailures, descHealthy} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.r.Loads() {
		h := 0.0
		if l.Healthy {
			h = 1
		}
		ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(l.Keys), l.Name)
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(l.InFlight), l.Name)
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(l.Requests), l.Name)
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(l.Failures), l.Name)
		ch <- prometheus.MustNewConstMetric(descHealthy, prometheus.GaugeValue, h, l.Name)
	}
}
