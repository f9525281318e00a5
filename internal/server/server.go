// Package server exposes simulator sessions over HTTP: the native session
// API (/v1/sessions…), OpenEnv's HTTP and WebSocket protocol (/reset,
// /step, /state, /health, /schema, /ws), Prometheus /metrics, optional
// bearer-token auth and graceful shutdown, behind an edge ([Edge]) that
// serves only this server's Host names and origins, only JSON bodies, and
// bounds request size, read, write and idle time and connections. Other
// surfaces (an MCP facade) mount their handlers with Server.Handle.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/httpedge"
	"github.com/agentworld/agentworld/internal/mcpworld"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// DefaultDrainTimeout is how long [Server.Serve] lets in-flight steps
// finish after its context ends when [Options.DrainTimeout] is zero.
const DefaultDrainTimeout = 30 * time.Second

// Options configures a Server. The zero value of each field is a usable
// default.
type Options struct {
	// APIKey, when set, is required as "Authorization: Bearer KEY" on every
	// route except /health, /healthz and /ready (which still check Host and
	// Origin).
	APIKey string
	// MaxBodyBytes bounds a request body; 0 means 8 MiB.
	MaxBodyBytes int64
	// DefaultWorld is the world OpenEnv /reset uses when the request names
	// none; "" means the first loaded world by name.
	DefaultWorld string
	// Registry receives the server's metrics; nil makes a new one.
	Registry *prometheus.Registry
	// Metrics, when set, is used instead of a new Metrics on Registry (pass
	// the one given to the Manager as its Observer).
	Metrics *Metrics
	// DrainTimeout bounds graceful shutdown; 0 means [DefaultDrainTimeout].
	DrainTimeout time.Duration
	// Edge bounds the HTTP edge: allowed Host and Origin headers,
	// timeouts and the connection limit (see [Edge]; the zero value is the
	// safe default). Entries that [Edge.Validate] refuses are ignored.
	Edge Edge
	// MCP, when set, is served at /mcp/{world} behind the same auth; its
	// sessions are closed when Serve shuts down (their open streams would
	// hold the drain). Nil serves no MCP.
	MCP *mcpworld.Facade
	// Sessions, when set, routes every request naming a session (the
	// session API, OpenEnv's HTTP, WebSocket and JSON-RPC surfaces, MCP
	// sessions; see routing.go) before this server serves it: a
	// cluster's owner routing ([cluster.Router]). Nil serves every
	// session here.
	Sessions SessionRouter
	// Groups, when set, shares the roots of reset groups (resets carrying
	// a group_key) with the other nodes of a cluster, so that a group's
	// resets fork one root whichever nodes they reach (*jetstore.Store).
	// Nil keeps each group's root in this server's memory.
	Groups GroupRegistry
	// Ready, when set, says whether this node can serve now; GET /ready
	// answers 503 with its reason while it returns an error (a cluster
	// node whose lease cannot be renewed: *jetstore.Store's Ready). Nil
	// means always ready. /health stays 200 either way: a process that
	// answers is alive, and restarting it would not bring its store back.
	Ready func() error
	// Logger receives request logs; nil discards them.
	Logger *slog.Logger
}

// SessionRouter decides where a request for session id is served: it
// answers the request itself (true), leaves it to this server (false), or
// returns an error this server answers.
type SessionRouter interface {
	Route(w http.ResponseWriter, r *http.Request, id string) (bool, error)
	// Locate decides as Route does without answering: nil means here,
	// else the live owner's base URL, to which the caller carries the
	// request (a WebSocket) itself, with the headers Mark sets.
	// forwardedBy is the request's cluster.ForwardedHeader.
	Locate(ctx context.Context, id, forwardedBy string) (*url.URL, error)
	// Mark sets the headers of a request forwarded to an owner.
	Mark(h http.Header)
}

// Server serves a Manager's sessions.
type Server struct {
	m       *sim.Manager
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	reg     *prometheus.Registry
	metrics *Metrics
	edge    Edge
	gate    *httpedge.Guard

	// groups are the cached roots of resets that carry a group_key.
	groups groupRoots

	wsMu    sync.Mutex
	wsStop  chan struct{}
	wsConns sync.WaitGroup

	// onShutdown runs when Serve begins a graceful shutdown (see OnShutdown).
	onShutdown []func(context.Context)
}

// New builds a Server over m.
func New(m *sim.Manager, opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 8 << 20
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	met := o.Metrics
	if met == nil {
		met = NewMetrics(o.Registry)
	}
	met.trackSessions(o.Registry, m)
	eo := &httpedge.Options{APIKey: o.APIKey, MaxBodyBytes: o.MaxBodyBytes, Logger: log}
	guard, err := httpedge.New(o.Edge, eo)
	if err != nil {
		log.Warn("ignoring the allowed hosts and origins", "err", err)
		e := o.Edge
		e.AllowedHosts, e.AllowedOrigins = nil, nil
		guard, _ = httpedge.New(e, eo)
	}
	s := &Server{m: m, opts: o, log: log, mux: http.NewServeMux(), reg: o.Registry, metrics: met, edge: guard.Edge(), gate: guard, wsStop: make(chan struct{})}
	s.groups.shared = o.Groups
	s.routes()
	if o.MCP != nil {
		f := o.MCP
		s.Handle("/mcp/{world}", s.mcpRouted(streamsWait(f.Handler())))
		s.OnShutdown(func(ctx context.Context) {
			if err := f.Close(ctx); err != nil {
				log.Warn("close MCP sessions", "err", err)
			}
		})
	}
	return s
}

// Registry is the Prometheus registry /metrics serves; other packages
// register their collectors (router loads) on it.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Handle mounts another surface (e.g. the MCP facade under /mcp/) behind
// the server's auth and size limits.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, s.guard(pattern, h))
}

// OnShutdown registers f to run when Serve starts a graceful shutdown,
// before in-flight requests are drained. Call it before Serve.
func (s *Server) OnShutdown(f func(context.Context)) {
	s.onShutdown = append(s.onShutdown, f)
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

func (s *Server) routes() {
	// Health answers without auth, for probes, but only to this server's
	// own names: a probe names it by a loopback name or an IP address.
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("GET /healthz", s.health)
	s.mux.HandleFunc("GET /ready", s.ready)
	s.handleFunc("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}).ServeHTTP)

	s.handleFunc("GET /v1/worlds", s.listWorlds)
	s.handleFunc("GET /v1/worlds/{name}", s.getWorld)
	s.handleFunc("POST /v1/sessions", s.createSession)
	s.handleFunc("GET /v1/sessions/{id}", s.routed(s.getSession))
	s.handleFunc("DELETE /v1/sessions/{id}", s.routed(s.deleteSession))
	s.handleFunc("POST /v1/sessions/{id}/step", s.routed(s.stepSession))
	s.handleFunc("POST /v1/sessions/{id}/fork", s.routed(s.forkSession))

	s.handleFunc("POST /reset", s.openEnvReset)
	s.handleFunc("POST /step", s.openEnvStep)
	s.handleFunc("GET /state", s.openEnvState)
	s.handleFunc("GET /schema", s.openEnvSchema)
	s.handleFunc("GET /metadata", s.openEnvMetadata)
	s.handleFunc("GET /ws", s.openEnvWS)
	s.handleFunc("/mcp", s.mcpRoot)
	s.openEnvWorldRoutes()
}

// routed asks Options.Sessions where a session's request is served
// before f serves it here.
func (s *Server) routed(f http.HandlerFunc) http.HandlerFunc {
	rt := s.opts.Sessions
	if rt == nil {
		return f
	}
	return func(w http.ResponseWriter, r *http.Request) {
		handled, err := rt.Route(w, r, r.PathValue("id"))
		switch {
		case err != nil:
			s.writeError(w, r, err)
		case !handled:
			f(w, r)
		}
	}
}

func (s *Server) handleFunc(pattern string, f http.HandlerFunc) {
	s.mux.Handle(pattern, s.guard(pattern, f))
}

// guard applies the edge checks (Host, Origin, auth, content type, body
// limit; see admit) and request metrics.
func (s *Server) guard(route string, h http.Handler) http.Handler {
	series := s.metrics.route(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := s.gate.Writer(w)
		defer func() { series.observe(sw.Status, time.Since(sw.Start)) }()
		if !s.admit(sw, r) {
			return
		}
		h.ServeHTTP(sw, r)
	})
}

// jsonType is the Content-Type header of every JSON reply, assigned to
// the header map as is: Header.Set would allocate the same one-element
// slice for every reply. net/http only reads it (and copies the map when
// it writes the header), and no handler here changes a header value in
// place.
var jsonType = []string{"application/json"}

// setJSONType marks a reply as JSON.
func setJSONType(w http.ResponseWriter) { w.Header()["Content-Type"] = jsonType }

func writeJSON(w http.ResponseWriter, status int, v any) {
	setJSONType(w)
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// readBody returns the request body whole: behind the guard, the buffer
// [httpedge.Guard.Admit] already read, without a second copy.
func readBody(r *http.Request) ([]byte, error) { return httpedge.ReadBody(r) }

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !s.admitOpen(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "healthy", "sessions": s.m.Len()})
}

// ready answers a readiness probe: 200 while the node can serve, 503
// with the reason while Options.Ready says it cannot (a load balancer or
// Kubernetes then sends its requests to the other nodes). Like /health it
// needs no token.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if !s.admitOpen(w, r) {
		return
	}
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "reason": err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "sessions": s.m.Len()})
}

func (s *Server) listWorlds(w http.ResponseWriter, r *http.Request) {
	out := []map[string]any{}
	for _, spec := range s.m.Worlds() {
		out = append(out, describeWorld(spec))
	}
	writeJSON(w, http.StatusOK, map[string]any{"worlds": out})
}

func (s *Server) getWorld(w http.ResponseWriter, r *http.Request) {
	spec, ok := s.m.World(r.PathValue("name"))
	if !ok {
		s.writeError(w, r, &Error{Status: http.StatusNotFound, Public: fmt.Sprintf("no world named %q", r.PathValue("name")), Field: "name", Code: "not_found"})
		return
	}
	writeJSON(w, http.StatusOK, spec)
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req api.CreateSessionRequest
	if err := decodeStrict(body, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := toCreate(s.m, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rep, err := s.m.Create(r.Context(), c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, rep)
}

// Transcript pages: GET /v1/sessions/{id} answers at most this many turns
// unless ?limit= asks for another page size up to maxTurnPage.
const (
	defaultTurnPage = 100
	maxTurnPage     = 1000
)

// TurnPage says which turns a transcript reply holds.
type TurnPage struct {
	// FromTurn is the 1-based turn the reply's turns start at.
	FromTurn int `json:"from_turn"`
	// Turns is how many turns the reply holds.
	Turns int `json:"turns"`
	// TotalTurns is how many turns the session has recorded.
	TotalTurns int `json:"total_turns"`
	// NextFromTurn is the from_turn of the next page; absent on the last.
	NextFromTurn int `json:"next_from_turn,omitempty"`
}

// sessionPage is GET /v1/sessions/{id}'s reply: the trajectory with one
// page of its turns, and which page that is.
type sessionPage struct {
	*trajectory.Trajectory
	Page TurnPage `json:"page"`
}

// queryInt reads an optional positive integer query parameter.
func queryInt(r *http.Request, name string, def, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, badRequest(name, "%q is not an integer in 1..%d", v, max)
	}
	return n, nil
}

// getSession answers a session's transcript one page of turns at a time
// (?from_turn=, 1-based, and ?limit=), so a long episode is never one
// unbounded reply.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	from, err := queryInt(r, "from_turn", 1, math.MaxInt32)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := queryInt(r, "limit", defaultTurnPage, maxTurnPage)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.m.Trajectory(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	total := len(t.Turns)
	lo := min(from-1, total)
	hi := min(lo+limit, total)
	t.Turns = t.Turns[lo:hi]
	page := TurnPage{FromTurn: from, Turns: hi - lo, TotalTurns: total}
	if hi < total {
		page.NextFromTurn = hi + 1
	}
	writeJSON(w, http.StatusOK, sessionPage{Trajectory: t, Page: page})
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	if err := s.m.Delete(r.Context(), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"session_id": r.PathValue("id"), "closed": true})
}

func (s *Server) stepSession(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := decodeStepRequest(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, enc, err := s.m.StepJSON(r.Context(), r.PathValue("id"), sim.StepRequest{
		Action: req.Action, Turn: req.Turn, Control: req.Control, WorldState: req.WorldState, Labels: req.Labels,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if enc == nil { // a retried turn's stored result
		writeJSON(w, http.StatusOK, res)
		return
	}
	// The bytes writeJSON would write, encoded once for this reply and the
	// turn's record (see sim.EncodeResult).
	setJSONType(w)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(enc)
}

func (s *Server) forkSession(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req api.ForkSessionRequest
	if err := decodeStrict(body, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	rep, err := s.m.Fork(r.Context(), r.PathValue("id"), sim.ForkRequest{AtTurn: req.AtTurn, Seed: req.Seed, Labels: req.Labels})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, rep)
}

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting connections, lets in-flight steps finish (up to DrainTimeout)
// and ends WebSocket loops after their current message. It does not close
// the Manager: whoever made it does (app.App.Close), after Serve returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ln = s.gate.Listen(ln)
	srv := s.gate.HTTPServer(s.mux, s.log)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down: draining in-flight steps")
	dctx, cancel := context.WithTimeout(context.Background(), s.opts.DrainTimeout)
	defer cancel()
	for _, f := range s.onShutdown {
		f(dctx)
	}
	s.stopWebSockets()
	err := srv.Shutdown(dctx)
	if err != nil {
		_ = srv.Close() // drain time is up: drop what is still open
	}
	wsDone := make(chan struct{})
	go func() { s.wsConns.Wait(); close(wsDone) }()
	select {
	case <-wsDone:
	case <-dctx.Done():
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

func (s *Server) stopWebSockets() {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	select {
	case <-s.wsStop:
	default:
		close(s.wsStop)
	}
}
