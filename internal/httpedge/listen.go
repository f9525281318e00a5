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
// whose connection is closed so sees its reads fail; a message its
// client sent just as the connection was chosen (not yet read, so the
// connection still marked waiting) is lost with it, as with any
// connection the server closes. Requests not
// served by a [Guard.HTTPServer] on a [Guard.Listen] listener are left
// alone.
func Waiting(r *http.Request, waiting bool) {
	if c, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
		c.p.setWaiting(c, waiting)
	}
}

// setWaiting is [Waiting] for c.
func (p *connPool) setWaiting(c *trackedConn, waiting bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unquietLocked(c)
	c.parked = waiting
	if waiting && !c.closed && !c.taken {
		c.since = time.Now()
		c.elem = p.quiet.PushBack(c)
	}
	p.changedLocked()
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
//
// Its one lock, mu, is never held while a connection is closed (closing
// one takes it, to give the slot back).
type connPool struct {
	edge         Edge
	max          int // <= 0: no cap
	perClient    int // <= 0: no cap per client
	pressureIdle time.Duration

	mu sync.Mutex
	// n counts the connections held.
	n int
	// quiet lists the connections that are idle or have not sent a
	// request yet, in the order they became so (oldest first).
	quiet    list.List
	byClient map[string]int
	// changed is closed, and replaced, at every change of the counts or
	// of the quiet list, when watched (someone took it since the last
	// change). Each Accept waiting for room waits on the one it saw when
	// it last looked, so every waiter (one per listener) sees every
	// change: a single buffered wake-up went to one waiter only and left
	// another listener's Accept asleep beside a free slot.
	changed chan struct{}
	watched bool
	// waiting counts the Accepts waiting for room.
	waiting  int
	refusing int
	// refusals are the goroutines writing refusals; Close of a listener
	// waits for them.
	refusals sync.WaitGroup
	// shed counts connections closed to make room, for tests and logs.
	shed int
	// waitHook, when set (by tests, before any Accept), runs each time
	// an Accept starts waiting for room, after it has let go of mu.
	waitHook func()
}

func newConnPool(e Edge) *connPool {
	return &connPool{edge: e, max: e.MaxConns, perClient: e.MaxConnsPerClient, pressureIdle: e.PressureIdleTimeout,
		byClient: map[string]int{}, changed: make(chan struct{})}
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
	taken  bool          // chosen to be closed to make room: never quiet again
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
		defer p.mu.Unlock()
		c.closed = true
		p.unquietLocked(c)
		p.n--
		if c.client != "" {
			if p.byClient[c.client]--; p.byClient[c.client] <= 0 {
				delete(p.byClient, c.client)
			}
		}
		p.changedLocked()
	}
}

// changedLocked wakes whoever waits on p.changed.
func (p *connPool) changedLocked() {
	if p.watched {
		close(p.changed)
		p.changed, p.watched = make(chan struct{}), false
	}
}

// watchLocked is the channel closed at the next change.
func (p *connPool) watchLocked() <-chan struct{} {
	p.watched = true
	return p.changed
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
	defer p.mu.Unlock()
	if st != http.StateHijacked {
		c.parked = false // a request ended or began: Waiting's mark was for the last one
	}
	switch st {
	case http.StateIdle:
		p.unquietLocked(c)
		if !c.closed && !c.taken {
			c.since, c.asked = time.Now(), true
			c.elem = p.quiet.PushBack(c)
		}
	case http.StateActive, http.StateHijacked, http.StateClosed:
		p.unquietLocked(c)
	}
	p.changedLocked()
}

// grace is how long c must have been quiet before it may be closed to
// make room: an idle keep-alive connection at once, a new one after
// newConnGrace, a parked one (a WebSocket waiting for its client, whose
// episode closing it ends) after PressureIdleTimeout.
func (p *connPool) grace(c *trackedConn) time.Duration {
	switch {
	case c.parked:
		return p.pressureIdle
	case c.asked:
		return 0
	}
	return newConnGrace
}

// takeLocked removes from the quiet list and returns the oldest quiet
// connection that may be closed now (of client when client is not ""),
// or nil. Parked connections come after every other: closing them loses
// their client's state.
func (p *connPool) takeLocked(client string, now time.Time) *trackedConn {
	for _, parked := range []bool{false, true} {
		for e := p.quiet.Front(); e != nil; e = e.Next() {
			c := e.Value.(*trackedConn)
			if c.parked == parked && (client == "" || c.client == client) && now.Sub(c.since) >= p.grace(c) {
				p.takeConnLocked(c)
				return c
			}
		}
	}
	return nil
}

// takeConnLocked marks c chosen to be closed to make room.
func (p *connPool) takeConnLocked(c *trackedConn) {
	p.unquietLocked(c)
	c.taken = true
	p.shed++
	p.changedLocked()
}

// nextLocked is when the next quiet connection may be closed to make
// room (the zero time with none quiet).
func (p *connPool) nextLocked() time.Time {
	var next time.Time
	for e := p.quiet.Front(); e != nil; e = e.Next() {
		c := e.Value.(*trackedConn)
		if at := c.since.Add(p.grace(c)); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
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
		p.takeConnLocked(c)
		out = append(out, c)
	}
	return out
}

// accept holds nc, just accepted, to the caps. A client at its
// MaxConnsPerClient has its own oldest quiet connection closed to make
// room; with none that may be closed it is refused (nil) at once, before
// any other client's connection is closed for it. Otherwise accept waits
// for room under MaxConns, closing quiet connections to make it, and
// under pressure closes the stale quiet ones too. It returns
// net.ErrClosed once done is closed.
func (p *connPool) accept(nc net.Conn, done <-chan struct{}) (*trackedConn, error) {
	c := &trackedConn{Conn: nc, p: p, client: clientOf(nc)}
	for {
		p.mu.Lock()
		now := time.Now()
		var victim *trackedConn
		switch {
		case c.client != "" && p.perClient > 0 && p.byClient[c.client] >= p.perClient:
			if victim = p.takeLocked(c.client, now); victim == nil {
				p.mu.Unlock()
				p.refuse(nc)
				return nil, nil
			}
		case p.max <= 0 || p.n < p.max:
			p.n++
			if c.client != "" {
				p.byClient[c.client]++
			}
			c.since = now
			c.elem = p.quiet.PushBack(c)
			p.changedLocked()
			stale := p.staleLocked(now)
			p.mu.Unlock()
			for _, s := range stale {
				_ = s.Close()
			}
			return c, nil
		default:
			victim = p.takeLocked("", now)
		}
		if victim != nil {
			p.mu.Unlock()
			_ = victim.Close() // gives its slot back
			continue
		}
		// Every held connection is working, or quiet for less than its
		// grace: wait for a change (one becomes quiet or closes) or for
		// the grace of the first quiet one to pass.
		wake := p.watchLocked()
		var t *time.Timer
		var tick <-chan time.Time
		if next := p.nextLocked(); !next.IsZero() {
			t = time.NewTimer(next.Sub(now))
			tick = t.C
		}
		p.waiting++
		hook := p.waitHook
		p.mu.Unlock()
		if hook != nil {
			hook()
		}
		var err error
		select {
		case <-wake:
		case <-tick:
		case <-done:
			err = net.ErrClosed
		}
		if t != nil {
			t.Stop()
		}
		p.mu.Lock()
		p.waiting-- // no change to wake anyone for: waiters would wake each other
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
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
		c, err := l.p.accept(nc, l.done)
		if err != nil {
			_ = nc.Close()
			return nil, err
		}
		if c != nil {
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
