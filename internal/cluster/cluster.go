// Package cluster lets any node of a cluster answer a request for any
// session. Sessions live in JetStream ([jetstore]); each has an owner node,
// the one that serves its steps, and a request reaching another node is
// routed by [Router.Route]:
//
//   - a session this node owns is served here (a node whose own lease
//     may have lapsed, as one paused past it, first confirms that it still
//     owns the session: [jetstore.Store.Owner]);
//   - a session whose owner is alive (its node lease, a heartbeat key with
//     a TTL, has not expired) is forwarded to the owner's HTTP address;
//   - a session whose owner's lease expired is taken over: this node
//     claims it with a compare-and-set on its owner record, forgets any
//     copy it held, and serves it, loading the transcript from the stream.
//     The world model is stateless given the transcript, so the recorded
//     answers are replayed, never sampled again, and the next request to
//     the model extends the previous one byte for byte;
//   - a real-environment session (sandbox state lives on its node) cannot
//     move: when its node is gone the request fails with [ErrCannotMove].
//
// [Router.Locate] gives the same decision without answering the request,
// for a caller that carries it itself (internal/server proxies an OpenEnv
// WebSocket to the owner). A session found without an owner record is
// looked up again on the owners stream's leader before this node serves it
// (a replica's read may not yet hold a record written a moment ago).
//
// Whatever the routing does, the store's expected-sequence appends keep
// one writer per transcript: a node with a stale copy cannot append.
package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/sim"
)

// ForwardedHeader marks a request one node forwarded to another, which
// serves it or refuses it but never forwards it again.
const ForwardedHeader = "X-Agentworld-Forwarded-By"

// Errors of routing, matched with errors.Is.
var (
	// ErrCannotMove: the session's environment is real (a sandbox on its
	// node) and its node is gone (409).
	ErrCannotMove = errors.New("session cannot move to another node")
	// ErrOwnerUnreachable: the owner's lease holds but it did not answer,
	// or ownership is changing hands; retry after the lease (503).
	ErrOwnerUnreachable = errors.New("the session's owner node is unreachable")
)

// Ownership is what routing needs of the store: *jetstore.Store.
type Ownership interface {
	Self() string
	Owner(ctx context.Context, id string) (jetstore.Lease, error)
	Claim(ctx context.Context, id string, prev jetstore.Lease) error
	// Forget drops what Owner remembers of session id's owner, after a
	// forward to it failed or was refused.
	Forget(id string)
}

// DefaultMaxIdleConnsPerNode is how many idle connections the default
// transport keeps to each other node: forwarding is most of a cluster's
// traffic between nodes, and net/http's default of 2 would make nearly
// every concurrent forward dial a new connection.
const DefaultMaxIdleConnsPerNode = 256

// leaderReader is an Ownership whose Owner may answer from a replica
// behind the leader (*jetstore.Store): a session found without an owner
// is looked up again on the leader before this node serves it itself.
type leaderReader interface {
	OwnerFromLeader(ctx context.Context, id string) (jetstore.Lease, error)
}

// Options configures a [Router]. Nil means every default.
type Options struct {
	// Evict forgets this node's copy of a session it takes over
	// (sim.Manager.Evict); nil forgets nothing.
	Evict func(id string) bool
	// Movable reports whether a backend's sessions can move to another
	// node; nil means every backend but the real environments ("real:…").
	Movable func(backend string) bool
	// Transport carries forwarded requests; nil means this package's own
	// forwarding (see forward.go) for plain requests with a small body, and
	// a copy of http.DefaultTransport for the rest, each keeping
	// DefaultMaxIdleConnsPerNode idle connections to each node.
	Transport http.RoundTripper
	// Logger receives takeovers and forwarding failures; nil discards
	// them.
	Logger *slog.Logger
}

// Router routes session requests to their owner nodes.
type Router struct {
	own Ownership
	o   Options
	log *slog.Logger
	fwd *forwarder // nil when Options.Transport was given

	// targets are the owners' base URLs by their address (Lease.Addr),
	// parsed once rather than for every forward; a few per node, so the
	// map is emptied when it reaches maxTargets (addresses of nodes long
	// gone).
	mu      sync.RWMutex
	targets map[string]*url.URL
}

// maxTargets bounds Router.targets.
const maxTargets = 64

// New makes a Router over own.
func New(own Ownership, opts *Options) *Router {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Movable == nil {
		o.Movable = func(b string) bool { return !strings.HasPrefix(b, "real") }
	}
	var fwd *forwarder
	if o.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns, t.MaxIdleConnsPerHost = 0, DefaultMaxIdleConnsPerNode
		o.Transport = t
		fwd = newForwarder(t.DialContext, DefaultMaxIdleConnsPerNode)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Router{own: own, o: o, log: log, fwd: fwd, targets: map[string]*url.URL{}}
}

// claimTries bounds the claims of one request that other nodes win.
const claimTries = 3

// Route decides where a request for session id is served. It returns
// true when it answered the request (forwarded it); false when this node
// should serve it; or an error for the caller to answer.
func (r *Router) Route(w http.ResponseWriter, req *http.Request, id string) (bool, error) {
	owner, err := r.locate(req.Context(), id, req.Header.Get(ForwardedHeader))
	if err != nil || owner == nil {
		return false, err
	}
	return true, r.forward(w, req, id, *owner)
}

// Locate decides where a request for session id is served, as Route does,
// without answering it: nil means here (taking the session over if its
// owner is gone); otherwise the base URL of the live owner, to which the
// caller carries the request itself (a WebSocket it proxies), marked with
// [Router.Mark]. forwardedBy is the request's [ForwardedHeader].
func (r *Router) Locate(ctx context.Context, id, forwardedBy string) (*url.URL, error) {
	owner, err := r.locate(ctx, id, forwardedBy)
	if err != nil || owner == nil {
		return nil, err
	}
	return ownerURL(id, *owner)
}

// Mark sets the header that tells the owner a request was forwarded.
func (r *Router) Mark(h http.Header) { h.Set(ForwardedHeader, r.own.Self()) }

// locate is Route's decision: nil (serve here) or the live owner's lease.
func (r *Router) locate(ctx context.Context, id, forwardedBy string) (*jetstore.Lease, error) {
	self := r.own.Self()
	for range claimTries {
		l, err := r.own.Owner(ctx, id)
		if lr, ok := r.own.(leaderReader); ok && err == nil && l.Revision == 0 {
			// perhaps created elsewhere a moment ago: ask the leader
			l, err = lr.OwnerFromLeader(ctx, id)
		}
		switch {
		case err != nil:
			return nil, fielderr.Wrap(ErrOwnerUnreachable, "session_id", err)
		case l.Revision == 0 || l.Node == self:
			// no owner record (unknown, or created without one): served
			// here, where the store says whether it exists
			return nil, nil
		case l.Alive:
			if forwardedBy != "" {
				return nil, fielderr.New(ErrOwnerUnreachable, "session_id",
					"session %s is owned by node %s, not this one (%s forwarded it here); retry", id, l.Node, forwardedBy)
			}
			return &l, nil
		case !r.o.Movable(l.Backend):
			return nil, fielderr.New(ErrCannotMove, "session_id",
				"session %s runs in a real environment (backend %s) on node %s, whose lease expired; its sandbox state cannot move to another node, so start a new session",
				id, l.Backend, l.Node)
		}
		switch err := r.own.Claim(ctx, id, l); {
		case errors.Is(err, jetstore.ErrClaimLost):
			continue // another node took it first: route to that one
		case err != nil:
			return nil, fielderr.Wrap(ErrOwnerUnreachable, "session_id", err)
		}
		if r.o.Evict != nil {
			r.o.Evict(id)
		}
		r.log.Info("took over session", "session", id, "from", l.Node)
		return nil, nil
	}
	return nil, fielderr.New(ErrOwnerUnreachable, "session_id", "session %s changed owners %d times during this request; retry", id, claimTries)
}

// ownerURL is the owner's base URL from its lease.
func ownerURL(id string, l jetstore.Lease) (*url.URL, error) {
	target, err := url.Parse(l.Addr)
	if err != nil || target.Host == "" {
		return nil, fielderr.New(ErrOwnerUnreachable, "session_id", "session %s: owner node %s has no usable address %q", id, l.Node, l.Addr)
	}
	return target, nil
}

// target is ownerURL(id, l), parsed once per address. The URL is shared:
// nothing it is given to changes it.
func (r *Router) target(id string, l jetstore.Lease) (*url.URL, error) {
	r.mu.RLock()
	u := r.targets[l.Addr]
	r.mu.RUnlock()
	if u != nil {
		return u, nil
	}
	u, err := ownerURL(id, l)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if len(r.targets) >= maxTargets {
		clear(r.targets)
	}
	r.targets[l.Addr] = u
	r.mu.Unlock()
	return u, nil
}

// forward proxies req to the owner. An owner that does not answer (it
// just died; its lease has not yet run out) is ErrOwnerUnreachable.
func (r *Router) forward(w http.ResponseWriter, req *http.Request, id string, l jetstore.Lease) error {
	target, err := r.target(id, l)
	if err != nil {
		return err
	}
	var failed error
	if r.fwd != nil && canForward(req, target) {
		failed = r.fwd.forward(w, req, target, r.own.Self(), func() { r.own.Forget(id) })
	} else {
		failed = r.proxy(w, req, id, target)
	}
	if be, ok := errors.AsType[*bodyError](failed); ok {
		return fielderr.Wrap(sim.ErrBadRequest, "body", be.err)
	}
	if failed != nil {
		r.own.Forget(id)
		r.log.Warn("forward to owner failed", "session", id, "owner", l.Node, "err", failed)
		return fielderr.New(ErrOwnerUnreachable, "session_id", "session %s: owner node %s did not answer; retry after its lease", id, l.Node)
	}
	return nil
}

// proxy carries a request [forwarder] does not (a body of unknown or
// large size, an event stream, TLS, a caller's Transport) through
// httputil.ReverseProxy; the error says the owner did not answer.
func (r *Router) proxy(w http.ResponseWriter, req *http.Request, id string, target *url.URL) error {
	var failed error
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The client's Host: the owner checks it as this node did
			// (the nodes share their edge settings), where the owner's
			// internal address might be no name it serves.
			pr.Out.Host = pr.In.Host
			r.Mark(pr.Out.Header)
		},
		Transport: r.o.Transport,
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusServiceUnavailable {
				// the owner refused (no longer the owner, or its store
				// did not answer): the next request looks it up again
				r.own.Forget(id)
			}
			return nil
		},
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) {
			failed = err
		},
		BufferPool: proxyBuffers{},
	}
	p.ServeHTTP(w, req)
	return failed
}

// proxyBuffers lends ReverseProxy its copy buffers, which it would
// otherwise allocate (32 KiB) for every answer.
type proxyBuffers struct{}

var proxyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (proxyBuffers) Get() []byte  { return *proxyBufPool.Get().(*[]byte) }
func (proxyBuffers) Put(b []byte) { proxyBufPool.Put(&b) }
