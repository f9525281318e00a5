package httpedge

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
)

// Listen prepares ln for serving under the guard: the address it is bound
// to becomes an allowed Host (every IP-literal Host when it is 0.0.0.0 or
// [::]), and at most MaxConns accepted connections are held at once.
// Closing the returned listener closes ln.
func (g *Guard) Listen(ln net.Listener) net.Listener {
	g.hosts.listenOn(ln.Addr())
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() && len(g.edge.AllowedHosts) == 0 {
		g.log.Info(g.edge.WithHint("listening on every address: clients must name this host by IP address or a loopback name; DNS names need AllowedHosts", SettingAllowedHosts))
	}
	return limitConns(ln, g.edge.MaxConns)
}

// HTTPServer is an http.Server for h with the edge's header, read and idle
// timeouts. It has no WriteTimeout: that would run from the end of the
// request's headers and cut long handlers; [ResponseWriter] sets one per
// write instead. Its own errors go to errorLog (nil: the guard's logger).
func (g *Guard) HTTPServer(h http.Handler, errorLog *slog.Logger) *http.Server {
	if errorLog == nil {
		errorLog = g.log
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: g.edge.ReadHeaderTimeout, ReadTimeout: g.edge.ReadTimeout,
		IdleTimeout: g.edge.IdleTimeout, ErrorLog: slog.NewLogLogger(errorLog.Handler(), slog.LevelWarn)}
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
