package mcpworld

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resumer is a Simulator that can say whether a session another process
// opened is open here now (a cluster node that took it over).
type Resumer interface {
	// Resume reports the world of the open simulator session id; an error
	// when there is none open.
	Resume(ctx context.Context, id string) (world string, err error)
}

// resumedSession is an MCP session this facade did not begin: another
// node of a cluster did, died, and this node took its simulator session
// over. The MCP SDK's handler knows only the sessions it began, so the
// facade serves these on their own transports.
type resumedSession struct {
	t    *mcp.StreamableServerTransport
	ss   *mcp.ServerSession
	idle *time.Timer
	// ended closes once the session ended and its simulator session was
	// closed.
	ended chan struct{}
}

// serveResumable is the handler with Options.SessionIDs: requests of a
// resumed session go to its transport; a request naming a session that is
// unknown here but open in the simulator (taken over from a dead node)
// resumes it; everything else is the SDK's.
func (f *Facade) serveResumable(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		f.handler.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	rs, resumed := f.resumed[id]
	_, known := f.byID[id]
	f.mu.Unlock()
	if !resumed && !known {
		rs = f.resume(r, id)
	}
	if rs == nil {
		f.handler.ServeHTTP(w, r)
		return
	}
	f.serveResumed(w, r, rs)
}

// resume takes over MCP session id, whose simulator session is open
// here: a new server session on its own transport, initialized as the
// client's requests say it was (the protocol version in its header). nil
// when the simulator has no such session of this world open, or the
// facade is closing.
func (f *Facade) resume(r *http.Request, id string) *resumedSession {
	res, ok := f.sim.(Resumer)
	if !ok {
		return nil
	}
	f.resumeMu.Lock()
	defer f.resumeMu.Unlock()
	f.mu.Lock()
	rs, done := f.resumed[id]
	f.mu.Unlock()
	if done {
		return rs
	}
	name := worldOf(r)
	if w, err := res.Resume(r.Context(), id); err != nil || w != name {
		return nil
	}
	srv, b, err := f.server(name, SessionOptions{})
	if err != nil {
		return nil
	}
	version := r.Header.Get("Mcp-Protocol-Version")
	if version == "" {
		vs := legacyVersions()
		version = vs[len(vs)-1]
	}
	b.sim = id // not opened again: it is open
	t := &mcp.StreamableServerTransport{SessionID: id}
	ss, err := srv.Connect(context.WithoutCancel(r.Context()), t, &mcp.ServerSessionOptions{State: &mcp.ServerSessionState{
		InitializeParams:  &mcp.InitializeParams{ProtocolVersion: version},
		InitializedParams: &mcp.InitializedParams{},
		LogLevel:          "info",
	}})
	if err != nil {
		f.log.Warn("resume MCP session", "session", id, "err", err)
		return nil
	}
	rs = &resumedSession{t: t, ss: ss, idle: time.AfterFunc(f.opts.SessionTimeout, func() { _ = ss.Close() }), ended: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		rs.idle.Stop()
		_ = ss.Close()
		return nil
	}
	f.wg.Add(1)
	f.bindLocked(b, ss, id, rs.ended)
	f.resumed[id] = rs
	f.log.Info("MCP session resumed", "world", name, "session", id)
	return rs
}

// serveResumed serves one request of a resumed session as the SDK's
// handler serves its own: POST and GET on the transport (with the same
// header checks), DELETE ends the session.
func (f *Facade) serveResumed(w http.ResponseWriter, r *http.Request, rs *resumedSession) {
	rs.idle.Reset(f.opts.SessionTimeout)
	accept := strings.Join(r.Header.Values("Accept"), ",")
	switch r.Method {
	case http.MethodDelete:
		// ended once answered, as the SDK's own sessions are: a later
		// request finds it unknown
		_ = rs.ss.Close()
		<-rs.ended
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		if !strings.Contains(accept, "text/event-stream") && !strings.Contains(accept, "*/*") {
			http.Error(w, "Accept must contain 'text/event-stream' for GET requests", http.StatusBadRequest)
			return
		}
		rs.t.ServeHTTP(w, r)
	case http.MethodPost:
		if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != "application/json" {
			http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
			return
		}
		if !strings.Contains(accept, "*/*") && (!strings.Contains(accept, "application/json") || !strings.Contains(accept, "text/event-stream")) {
			http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
			return
		}
		rs.t.ServeHTTP(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}
