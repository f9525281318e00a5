package httpedge

import (
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Listen prepares ln for serving under the guard: the address it is bound
// to becomes an allowed Host (every IP-literal Host when it is 0.0.0.0 or
// [::]), and its connections are held to the edge's caps (see
// [Edge.MaxConns]); an [http.Server] from [Guard.HTTPServer] tells the
// guard which of them are idle. Closing the returned listener closes ln.
// The caps count the connections of all the guard's listeners together.
func (g *Guard) Listen(ln net.Listener) net.Listener {
	g.hosts.listenOn(ln.Addr())
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() && len(g.edge.AllowedHosts) == 0 {
		g.log.Info(g.edge.WithHint("listening on every address: clients must name this host by IP address or a loopback name; DNS names need AllowedHosts", SettingAllowedHosts))
	}
	if g.conns.max <= 0 && g.conns.perClient <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, p: g.conns, done: make(chan struct{})}
}

// HTTPServer is an http.Server for h with the edge's header, read and idle
// timeouts. It has no WriteTimeout: that would run from the end of the
// request's headers and cut long handlers; [ResponseWriter] sets one per
// write instead. Its ConnState hook tells the guard's connection caps
// which connections are idle, so serve it on a listener from
// [Guard.Listen]. Its own errors go to errorLog (nil: the guard's logger).
func (g *Guard) HTTPServer(h http.Handler, errorLog *slog.Logger) *http.Server {
	if errorLog == nil {
		errorLog = g.log
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: g.edge.ReadHeaderTimeout, ReadTimeout: g.edge.ReadTimeout,
		IdleTimeout: g.edge.IdleTimeout, ConnState: g.conns.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*trackedConn); ok {
				return context.WithValue(ctx, connKey{}, tc)
			}
			return ctx
		},
		ErrorLog: slog.NewLogLogger(errorLog.Handler(), slog.LevelWarn)}
}

// connKey keys a request's *trackedConn in its context.
type connKey struct{}

// Waiting tells the connection caps that the long-lived connection that
// r came on (a WebSocket after its upgrade, an event stream that only
// carries what the server has to say) is waiting for its client (waiting
// true) or working for it again (false). A connection waiting
// for longer than PressureIdleTimeout may be closed when a new client
// finds MaxConns (or its own client's MaxConnsPerClient) full, after
// every idle keep-alive connection: so idle WebSockets cannot keep
// other clients out, as idle keep-alive connections cannot. A handler
// whose connection is closed so sees its reads fail. Requests not
// served by a [Guard.HTTPServer] on a [Guard.Listen] listener are left
// alone.
func Waiting(r *http.Request, waiting bool) {
	c, ok := r.Context().Value(connKey{}).(*trackedConn)
	if !ok {
		return
	}
	p := c.p
	p.mu.Lock()
	p.unquietLocked(c)
	c.parked = waiting
	if waiting && !c.closed {
		c.since = time.Now()
		c.elem = p.quiet.PushBack(c)
	}
	p.mu.Unlock()
	if waiting {
		p.signal()
	}
}

// pressureQuarters is the share of MaxConns, in quarters, held from
// which the server is under pressure and PressureIdleTimeout replaces
// IdleTimeout.
const pressureQuarters = 3

// newConnGrace is how long a connection that has sent no request yet is
// left alone when its slot is wanted: the time a client takes from
// connecting to sending its request is far below it, a client that holds
// a connection open without asking anything is not.
const newConnGrace = time.Second

// maxRefusing bounds the refusals being written at once (each holds its
// connection for up to refusalLinger); beyond it refused connections are
// closed without a word.
const (
	maxRefusing    = 64
	refusalLinger  = 500 * time.Millisecond
	refusalTimeout = 100 * time.Millisecond
)

// connPool holds the connections of a guard's listeners to the edge's
// caps. It knows each connection's state from the http.Server's ConnState
// hook, so that the cap is reached only by connections doing work: when a
// new client needs a slot, an idle keep-alive connection (or one that has
// sent nothing since it connected, after newConnGrace) is closed to make
// room, oldest first, and under pressure idle connections are closed
// after PressureIdleTimeout instead of IdleTimeout.
type connPool struct {
	edge         Edge
	max          int // <= 0: no cap
	perClient    int // <= 0: no cap per client
	pressureIdle time.Duration

	mu sync.Mutex
	// n counts the connections held, slots reserved for an Accept
	// included.
	n int
	// quiet lists the connections that are idle or have not sent a
	// request yet, in the order they became so (oldest first).
	quiet    list.List
	byClient map[string]int
	// wake gets a value when a connection becomes quiet or closes, for an
	// Accept waiting for room.
	wake     chan struct{}
	refusing int
	// refusals are the goroutines writing refusals; Close of a listener
	// waits for them.
	refusals sync.WaitGroup
	// shed counts connections closed to make room, for tests and logs.
	shed int
}

func newConnPool(e Edge) *connPool {
	return &connPool{edge: e, max: e.MaxConns, perClient: e.MaxConnsPerClient, pressureIdle: e.PressureIdleTimeout,
		byClient: map[string]int{}, wake: make(chan struct{}, 1)}
}

// trackedConn is a held connection. Its first Close gives its slot back.
type trackedConn struct {
	net.Conn
	p *connPool
	// client is what the per-client cap counts it under (see clientOf);
	// "" is not capped per client.
	client string
	once   sync.Once

	// Guarded by p.mu.
	elem   *list.Element // in p.quiet while quiet
	since  time.Time     // when it became quiet
	asked  bool          // it has sent a request (idle, not new)
	parked bool          // a long-lived connection waiting for its client (see Waiting)
	closed bool
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.p.release(c))
	return err
}

// release returns c's slot; it runs once, on c's first Close.
func (p *connPool) release(c *trackedConn) func() {
	return func() {
		p.mu.Lock()
		c.closed = true
		p.unquietLocked(c)
		p.n--
		if c.client != "" {
			if p.byClient[c.client]--; p.byClient[c.client] <= 0 {
				delete(p.byClient, c.client)
			}
		}
		p.mu.Unlock()
		p.signal()
	}
}

func (p *connPool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *connPool) unquietLocked(c *trackedConn) {
	if c.elem != nil {
		p.quiet.Remove(c.elem)
		c.elem = nil
	}
}

// connState is the http.Server's ConnState hook: it keeps the quiet list.
func (p *connPool) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*trackedConn)
	if !ok || c.p != p {
		return
	}
	p.mu.Lock()
	if st != http.StateHijacked {
		c.parked = false // a request ended or began: Waiting's mark was for the last one
	}
	switch st {
	case http.StateIdle:
		p.unquietLocked(c)
		if !c.closed {
			c.since, c.asked = time.Now(), true
			c.elem = p.quiet.PushBack(c)
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		p.unquietLocked(c)
	}
	p.mu.Unlock()
	if st == http.StateIdle {
		p.signal()
	}
}

// sheddable reports whether c may be closed now to make room: an idle
// keep-alive connection at once, a new one after newConnGrace, a parked
// one (a WebSocket waiting for its client, whose episode closing it
// ends) after PressureIdleTimeout.
func (p *connPool) sheddable(c *trackedConn, now time.Time) bool {
	if c.parked {
		return now.Sub(c.since) >= p.pressureIdle
	}
	return c.asked || now.Sub(c.since) >= newConnGrace
}

// takeLocked removes from the quiet list and returns the oldest quiet
// connection that may be closed now (of client when client is not ""),
// or nil. Parked connections come after every other: closing them loses
// their client's state.
func (p *connPool) takeLocked(client string, now time.Time) *trackedConn {
	for _, parked := range []bool{false, true} {
		for e := p.quiet.Front(); e != nil; e = e.Next() {
			c := e.Value.(*trackedConn)
			if c.parked == parked && (client == "" || c.client == client) && p.sheddable(c, now) {
				p.unquietLocked(c)
				p.shed++
				return c
			}
		}
	}
	return nil
}

// staleLocked removes from the quiet list and returns the connections
// quiet for longer than PressureIdleTimeout, when the pool is under
// pressure.
func (p *connPool) staleLocked(now time.Time) []*trackedConn {
	if p.max <= 0 || p.n*4 < p.max*pressureQuarters {
		return nil
	}
	var out []*trackedConn
	for e := p.quiet.Front(); e != nil; {
		c := e.Value.(*trackedConn)
		if now.Sub(c.since) < p.pressureIdle {
			break // the list is in the order connections became quiet
		}
		e = e.Next()
		if c.parked {
			continue // closed only for a client that is there (takeLocked)
		}
		p.unquietLocked(c)
		p.shed++
		out = append(out, c)
	}
	return out
}

// reserve waits for room for one more connection, closing quiet ones to
// make it, and takes it; under pressure it closes the stale quiet ones
// too. It returns net.ErrClosed once done is closed.
func (p *connPool) reserve(done <-chan struct{}) error {
	for {
		now := time.Now()
		p.mu.Lock()
		if p.max <= 0 || p.n < p.max {
			p.n++
			stale := p.staleLocked(now)
			p.mu.Unlock()
			for _, c := range stale {
				_ = c.Close()
			}
			return nil
		}
		victim := p.takeLocked("", now)
		young := p.quiet.Len() > 0
		p.mu.Unlock()
		if victim != nil {
			_ = victim.Close() // gives its slot back
			continue
		}
		// Every held connection is working, or quiet for less than
		// newConnGrace: wait for one to become quiet or close (or for
		// the grace of the young ones to pass).
		var t *time.Timer
		var tick <-chan time.Time
		if young {
			t = time.NewTimer(newConnGrace / 4)
			tick = t.C
		}
		select {
		case <-p.wake:
		case <-tick:
		case <-done:
			return net.ErrClosed
		}
		if t != nil {
			t.Stop()
		}
	}
}

// admit holds nc in its reserved slot, within its client's cap: the
// client's own oldest quiet connection is closed to make room; with none,
// nc is refused (nil).
func (p *connPool) admit(nc net.Conn) *trackedConn {
	c := &trackedConn{Conn: nc, p: p, client: clientOf(nc)}
	now := time.Now()
	p.mu.Lock()
	var victim *trackedConn
	if c.client != "" && p.perClient > 0 && p.byClient[c.client] >= p.perClient {
		if victim = p.takeLocked(c.client, now); victim == nil {
			p.n--
			p.mu.Unlock()
			p.signal()
			p.refuse(nc)
			return nil
		}
	}
	if c.client != "" {
		p.byClient[c.client]++
	}
	c.since = now
	c.elem = p.quiet.PushBack(c)
	p.mu.Unlock()
	if victim != nil {
		_ = victim.Close()
	}
	return c
}

// refuse answers a client over its cap 503 and closes its connection, off
// the Accept path.
func (p *connPool) refuse(nc net.Conn) {
	p.mu.Lock()
	if p.refusing >= maxRefusing {
		p.mu.Unlock()
		_ = nc.Close()
		return
	}
	p.refusing++
	p.refusals.Add(1)
	p.mu.Unlock()
	msg := p.edge.WithHint(fmt.Sprintf("too many connections from this address (at most %d at once)", p.perClient), SettingMaxConnsPerClient) + "\n"
	go func() {
		defer func() {
			_ = nc.Close()
			p.mu.Lock()
			p.refusing--
			p.mu.Unlock()
			p.refusals.Done()
		}()
		_ = nc.SetWriteDeadline(time.Now().Add(refusalTimeout))
		if _, err := fmt.Fprintf(nc, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg); err != nil {
			return
		}
		// Let the client read the answer before the close resets the
		// connection over the request it sent.
		if cw, ok := nc.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_ = nc.SetReadDeadline(time.Now().Add(refusalLinger))
		var buf [512]byte
		for n := 0; n < 64<<10; {
			k, err := nc.Read(buf[:])
			if err != nil {
				return
			}
			n += k
		}
	}()
}

// clientOf is what a connection's caps are counted under: its remote IP
// address; for a loopback connection, the user owning the client's socket
// ("uid N", read from the kernel on Linux), so one local user cannot take
// every slot from the others. A loopback client of the server's own user
// or root, or one whose owner cannot be read, is "" (uncapped): such a
// client can stop the server anyway, and a local reverse proxy or trainer
// of the operator's is one.
func clientOf(nc net.Conn) string {
	ta, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	if !ta.IP.IsLoopback() {
		return ta.IP.String()
	}
	la, ok := nc.LocalAddr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	uid, ok := loopbackOwner(la, ta)
	if !ok || uid == 0 || uid == selfUID {
		return ""
	}
	return "uid " + strconv.Itoa(uid)
}

// selfUID is the server's own user.
var selfUID = os.Getuid()

// limitListener holds its connections to a connPool. Close ends a waiting
// Accept and waits for the refusals being written.
type limitListener struct {
	net.Listener
	p         *connPool
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		// Room is made for a client that is there (accepted), so no
		// connection is closed for one that may never come.
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if err := l.p.reserve(l.done); err != nil {
			_ = nc.Close()
			return nil, err
		}
		if c := l.p.admit(nc); c != nil {
			return c, nil
		}
	}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	err := l.Listener.Close()
	l.p.refusals.Wait()
	return err
}
