package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Edge bounds what reaches the handlers: which Host and Origin headers are
// served, how long a client may take over a request, and how many
// connections are held at once. The zero value of every field is the safe
// default; a deployment behind a reverse proxy widens AllowedHosts (and
// AllowedOrigins for browser front ends).
type Edge struct {
	// AllowedHosts are Host header values served beside the loopback names
	// (localhost, 127.0.0.0/8, [::1], any port) and the address Serve
	// listens on: "name" allows any port, "name:port" that port only, "*"
	// any Host (for a proxy that checks Host itself; it turns DNS-rebinding
	// protection off). nil allows only the defaults, which is what stops
	// DNS rebinding (a page whose own name resolves to this server).
	AllowedHosts []string
	// AllowedOrigins are browser origins ("https://app.example:8443")
	// whose requests are served; "*" allows any. A request without an
	// Origin header (every non-browser client) is never refused for it,
	// and a page served from this server's own Host is same-origin. nil
	// allows no other origin, so a web page cannot drive sessions.
	AllowedOrigins []string
	// ReadHeaderTimeout bounds reading a request's headers; 0 means 10s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body, before
	// the handler runs; 0 means 60s. Steps are not bound by it: the body is
	// read before the step starts and the read deadline is lifted then.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of a response to the client (not the
	// time a step takes to think: every write gets this long from the
	// moment it starts); 0 means 60s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no next request
	// for this long; 0 means 2 minutes.
	IdleTimeout time.Duration
	// WebSocketIdle closes a /ws connection that sends no message for this
	// long (its sessions are released); 0 means 30 minutes.
	WebSocketIdle time.Duration
	// MaxConns caps the connections held at once (further clients wait in
	// the listen backlog); 0 means 1024, negative means no cap.
	MaxConns int
}

// withDefaults fills the zero fields.
func (e Edge) withDefaults() Edge {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&e.ReadHeaderTimeout, 10*time.Second)
	def(&e.ReadTimeout, 60*time.Second)
	def(&e.WriteTimeout, 60*time.Second)
	def(&e.IdleTimeout, 2*time.Minute)
	def(&e.WebSocketIdle, 30*time.Minute)
	if e.MaxConns == 0 {
		e.MaxConns = 1024
	}
	return e
}

// hostPolicy decides which Host and Origin headers are served.
type hostPolicy struct {
	mu sync.RWMutex
	// hosts maps a lower-case host name to the ports allowed with it ("" =
	// any port).
	hosts     map[string][]string
	anyHost   bool
	anyIP     bool // the server listens on every address: IP-literal Hosts are its own
	origins   map[string]bool
	anyOrigin bool
}

func newHostPolicy(e Edge) (*hostPolicy, error) {
	p := &hostPolicy{hosts: map[string][]string{}, origins: map[string]bool{}}
	for _, h := range e.AllowedHosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if h == "*" {
			p.anyHost = true
			continue
		}
		name, port := splitHost(h)
		if name == "" || strings.ContainsAny(h, "/@ ") {
			return nil, fmt.Errorf("allowed host %q: want a host name or name:port, no scheme or path", h)
		}
		p.hosts[name] = append(p.hosts[name], port)
	}
	for _, o := range e.AllowedOrigins {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if o == "*" {
			p.anyOrigin = true
			continue
		}
		n, err := normOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", o, err)
		}
		p.origins[n] = true
	}
	return p, nil
}

// listenOn adds the address the server listens on: its host with its
// port, or, for an unspecified address (0.0.0.0, [::]), every IP-literal
// Host: DNS rebinding needs a name, and a page at an IP literal of this
// server is this server.
func (p *hostPolicy) listenOn(addr net.Addr) {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ta.IP.IsUnspecified() {
		p.anyIP = true
		return
	}
	name := strings.ToLower(ta.IP.String())
	p.hosts[name] = append(p.hosts[name], fmt.Sprint(ta.Port))
}

// splitHost splits "name[:port]" (IPv6 in brackets) into a lower-case
// name without a trailing dot and the port ("" when none).
func splitHost(h string) (name, port string) {
	name = h
	if n, p, err := net.SplitHostPort(h); err == nil {
		name, port = n, p
	} else {
		name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	}
	return strings.TrimSuffix(strings.ToLower(name), "."), port
}

func normOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", err
	}
	if u.Scheme == "" || u.Host == "" {
		return "", errors.New("want scheme://host[:port]")
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// hostAllowed reports whether a request's Host header names this server.
func (p *hostPolicy) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	name, port := splitHost(host)
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true // RFC 6761: browsers resolve these to loopback only
	}
	ip := net.ParseIP(name)
	if ip != nil && ip.IsLoopback() {
		return true
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.anyHost || (ip != nil && p.anyIP) {
		return true
	}
	for _, want := range p.hosts[name] {
		if want == "" || want == port {
			return true
		}
	}
	return false
}

// originAllowed reports whether a browser request may proceed: no Origin
// (a non-browser client, or a same-origin navigation), the server's own
// origin, or an allowed one. A request without Origin that the browser
// marks cross-site is refused too.
func (p *hostPolicy) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return r.Header.Get("Sec-Fetch-Site") != "cross-site" || p.anyOrigin
	}
	if p.anyOrigin {
		return true
	}
	n, err := normOrigin(o)
	if err != nil {
		return false // "null" (sandboxed frames, file: pages) and junk
	}
	if u, _ := url.Parse(n); u != nil && strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return p.origins[n]
}

// jsonContent reports whether a Content-Type is JSON: application/json
// or a +json type, parameters allowed.
func jsonContent(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// hasBody reports whether a request carries a body.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// stateChanging reports the methods whose bodies must be JSON.
func stateChanging(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// admit runs the edge checks in the order that reads nothing a refused
// client sent: Host, Origin, auth, content type, declared length; then it
// reads the body (bounded by MaxBodyBytes and the server's ReadTimeout) and
// lifts the read deadline so a long step is not cut by it. On refusal it
// has written the response and returns false.
func (s *Server) admit(w *statusWriter, r *http.Request) bool {
	// A keep-alive connection still carries the write deadline of its last
	// reply; clear it so net/http's own writes (100 Continue) are not cut.
	_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Time{})
	refuse := func(e *Error) bool {
		// The client's unread body is not drained: the connection closes.
		w.Header().Set("Connection", "close")
		s.writeError(w, r, e)
		return false
	}
	if !s.hosts.hostAllowed(r.Host) {
		return refuse(&Error{Status: http.StatusForbidden, Field: "Host", Code: "forbidden_host",
			Public: fmt.Sprintf("field Host: %q is not a name of this server (serve --allowed-hosts adds names)", r.Host)})
	}
	if !s.hosts.originAllowed(r) {
		return refuse(&Error{Status: http.StatusForbidden, Field: "Origin", Code: "forbidden_origin",
			Public: fmt.Sprintf("field Origin: cross-origin requests from %q are not allowed (serve --allowed-origins adds origins)", r.Header.Get("Origin"))})
	}
	if s.opts.APIKey != "" && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentworld"`)
		return refuse(&Error{Status: http.StatusUnauthorized, Public: "missing or wrong bearer token", Field: "Authorization", Code: "unauthorized"})
	}
	if !hasBody(r) {
		s.liftReadDeadline(w)
		return true
	}
	if stateChanging(r.Method) && !jsonContent(r.Header.Get("Content-Type")) {
		return refuse(&Error{Status: http.StatusUnsupportedMediaType, Field: "Content-Type", Code: "unsupported_media_type",
			Public: fmt.Sprintf("field Content-Type: %q; send application/json", r.Header.Get("Content-Type"))})
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		return refuse(&Error{Status: http.StatusRequestEntityTooLarge, Field: "body", Code: "too_large",
			Public: fmt.Sprintf("field body: request body of %d bytes exceeds %d bytes", r.ContentLength, s.opts.MaxBodyBytes)})
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	r.Body.Close()
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return refuse(&Error{Status: http.StatusRequestTimeout, Field: "body", Code: "timeout",
				Public: "field body: not received within the read timeout", Cause: err})
		}
		return refuse(toError(err))
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.liftReadDeadline(w)
	return true
}

// liftReadDeadline clears the server's ReadTimeout once the request is
// read: when it passed during a long step or an MCP event stream, net/http's
// background read of the connection would fail and cancel the request's
// context.
func (s *Server) liftReadDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// limitListener holds at most n accepted connections open; Accept waits
// for a slot, so further clients queue in the kernel's backlog. Close ends
// a waiting Accept.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func limitConns(l net.Listener, n int) net.Listener {
	if n <= 0 {
		return l
	}
	return &limitListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// slotConn gives its slot back once, on the first Close.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Validate reports an allowed host or origin that cannot be parsed.
func (e Edge) Validate() error {
	_, err := newHostPolicy(e)
	return err
}
