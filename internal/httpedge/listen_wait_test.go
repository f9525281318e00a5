package httpedge

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// These tests walk a new client through each order of events around a
// full cap (it arrives before or after a held connection starts waiting
// for its client, a grace ends while it waits, two listeners wait at
// once, a connection chosen to make room marks itself again) on the
// connection pool itself, with pipes for connections and the pool's wait
// hook to know when an Accept is waiting; nothing sleeps.

// pipeFrom is the server end of a pipe claiming remote address ip; with
// ip "" it is a plain pipe, which no per-client cap counts.
func pipeFrom(t *testing.T, ip string) net.Conn {
	t.Helper()
	server, client := net.Pipe()
	t.Cleanup(func() { server.Close(); client.Close() })
	if ip == "" {
		return server
	}
	return remoteConn{Conn: server, addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 1}}
}

// holdWorking accepts a connection from ip (the cap has room) and marks it
// working on a request.
func holdWorking(t *testing.T, p *connPool, ip string) *trackedConn {
	t.Helper()
	c, err := p.accept(pipeFrom(t, ip), nil)
	if err != nil || c == nil {
		t.Fatalf("a connection within the caps: %v, %v; %v", c, err, p.stats())
	}
	p.connState(c, http.StateActive)
	return c
}

// park marks c waiting for its client (see Waiting) since d ago.
func park(p *connPool, c *trackedConn, d time.Duration) {
	p.setWaiting(c, true)
	p.mu.Lock()
	c.since = c.since.Add(-d)
	p.mu.Unlock()
}

func isClosed(p *connPool, c *trackedConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return c.closed
}

type accepted struct {
	c   *trackedConn
	err error
}

// acceptAsync runs an Accept's part for nc in the background.
func acceptAsync(p *connPool, nc net.Conn) <-chan accepted {
	ch := make(chan accepted, 1)
	go func() {
		c, err := p.accept(nc, nil)
		ch <- accepted{c, err}
	}()
	return ch
}

// awaitAccept is the result of an acceptAsync; a hang fails the test
// with the pool's state.
func awaitAccept(t *testing.T, p *connPool, ch <-chan accepted, what string) *trackedConn {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil || a.c == nil {
			t.Fatalf("%s: %v, %v; %v", what, a.c, a.err, p.stats())
		}
		return a.c
	case <-time.After(hangGuard):
		t.Fatalf("%s: still waiting after %v; %v", what, hangGuard, p.stats())
	}
	return nil
}

// hookWaits reports on the returned channel each time an Accept of p
// starts waiting for room.
func hookWaits(p *connPool) <-chan struct{} {
	ch := make(chan struct{}, 64)
	p.waitHook = func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return ch
}

func awaitWait(t *testing.T, p *connPool, waits <-chan struct{}) {
	t.Helper()
	select {
	case <-waits:
	case <-time.After(hangGuard):
		t.Fatalf("no Accept waited for room; %v", p.stats())
	}
}

// checkEmpty: with every connection closed, nothing is counted.
func checkEmpty(t *testing.T, p *connPool) {
	t.Helper()
	if st := p.stats(); st.Held != 0 || len(st.ByClient) != 0 || len(st.Quiet) != 0 || st.Waiting != 0 {
		t.Fatalf("with every connection closed: %v", st)
	}
}

// TestEveryWaitingAcceptSeesRoom: two listeners of one guard wait for
// room, and two connections close at once. Both are let in. The pool
// used to wake its waiters through one buffered value, so the second
// close's wake-up was dropped and one Accept slept beside a free slot
// until something else happened (for ever on a quiet server).
func TestEveryWaitingAcceptSeesRoom(t *testing.T) {
	p := newConnPool(Edge{MaxConns: 2, PressureIdleTimeout: time.Hour}.WithDefaults())
	held := []*trackedConn{holdWorking(t, p, ""), holdWorking(t, p, "")}
	// Both Accepts stop in the hook, having seen the cap full, until
	// both connections have closed.
	waits, proceed := make(chan struct{}, 2), make(chan struct{})
	p.waitHook = func() {
		select {
		case waits <- struct{}{}:
			<-proceed
		default:
		}
	}
	first, second := acceptAsync(p, pipeFrom(t, "")), acceptAsync(p, pipeFrom(t, ""))
	for range 2 {
		select {
		case <-waits:
		case <-time.After(hangGuard):
			t.Fatalf("the Accepts did not both wait; %v", p.stats())
		}
	}
	held[0].Close()
	held[1].Close()
	close(proceed)
	a, b := awaitAccept(t, p, first, "the first waiting Accept"), awaitAccept(t, p, second, "the second waiting Accept")
	a.Close()
	b.Close()
	checkEmpty(t, p)
}

// TestAWaitingAcceptWakesForAConnectionThatParksLater: the client
// arrives while every held connection is working; one of them then
// starts waiting for its client and, once it has waited
// PressureIdleTimeout, is closed for the new client with nothing else
// happening.
func TestAWaitingAcceptWakesForAConnectionThatParksLater(t *testing.T) {
	p := newConnPool(Edge{MaxConns: 1, PressureIdleTimeout: 50 * time.Millisecond}.WithDefaults())
	ws := holdWorking(t, p, "")
	waits := hookWaits(p)
	ch := acceptAsync(p, pipeFrom(t, ""))
	awaitWait(t, p, waits)
	p.setWaiting(ws, true)
	c := awaitAccept(t, p, ch, "a client beside a connection that started waiting after it came")
	if !isClosed(p, ws) {
		t.Fatalf("the waiting connection is still open; %v", p.stats())
	}
	c.Close()
	checkEmpty(t, p)
}

// TestAWaitingAcceptWakesWhenGraceEnds: the held connection was already
// waiting for its client when the new one came, for less than
// PressureIdleTimeout; the new client is let in when that time is up,
// though nothing else happens.
func TestAWaitingAcceptWakesWhenGraceEnds(t *testing.T) {
	p := newConnPool(Edge{MaxConns: 1, PressureIdleTimeout: time.Second}.WithDefaults())
	ws := holdWorking(t, p, "")
	p.setWaiting(ws, true)
	waits := hookWaits(p)
	c := awaitAccept(t, p, acceptAsync(p, pipeFrom(t, "")), "a client beside a connection within its grace")
	select {
	case <-waits:
	default:
		// Not a failure: the machine is slow enough that the grace had
		// passed before the client came, the order the other tests walk.
		t.Log("the client came after the grace had passed: this order was not walked")
	}
	if !isClosed(p, ws) {
		t.Fatalf("the waiting connection is still open; %v", p.stats())
	}
	c.Close()
	checkEmpty(t, p)
}

// TestAWorkingConnectionIsNotClosedForRoom: a connection that waited for
// its client long past PressureIdleTimeout and then got a message is
// working, and is not closed for a new client, which waits for it to
// end.
func TestAWorkingConnectionIsNotClosedForRoom(t *testing.T) {
	p := newConnPool(Edge{MaxConns: 1, PressureIdleTimeout: time.Millisecond}.WithDefaults())
	ws := holdWorking(t, p, "")
	park(p, ws, time.Hour)
	p.setWaiting(ws, false)
	waits := hookWaits(p)
	ch := acceptAsync(p, pipeFrom(t, ""))
	awaitWait(t, p, waits)
	if st := p.stats(); isClosed(p, ws) || st.Shed != 0 {
		t.Fatalf("a working connection was closed to make room; %v", st)
	}
	ws.Close()
	awaitAccept(t, p, ch, "a client once the working connection ended").Close()
	checkEmpty(t, p)
}

// TestATakenConnectionIsNotQuietAgain: a connection chosen to be closed
// to make room is not listed quiet again by its handler marking it
// waiting (or idle) before the close lands, so it is not chosen twice,
// and its slot is given back once.
func TestATakenConnectionIsNotQuietAgain(t *testing.T) {
	p := newConnPool(Edge{MaxConns: 1, PressureIdleTimeout: time.Millisecond}.WithDefaults())
	ws := holdWorking(t, p, "")
	park(p, ws, time.Hour)
	p.mu.Lock()
	victim := p.takeLocked("", time.Now())
	p.mu.Unlock()
	if victim != ws {
		t.Fatalf("the connection waiting past its grace was not chosen; %v", p.stats())
	}
	p.setWaiting(ws, false)
	p.setWaiting(ws, true)
	p.connState(ws, http.StateIdle)
	if st := p.stats(); len(st.Quiet) != 0 || st.Shed != 1 {
		t.Fatalf("the chosen connection is quiet again; %v", st)
	}
	ws.Close()
	ws.Close()
	checkEmpty(t, p)
}

// TestAClientOverItsCapClosesNoOtherConnection: a client at its
// MaxConnsPerClient with nothing of its own to give up is refused at
// once, and no other client's connection is closed for it: the pool used
// to make room under MaxConns first (closing another client's WebSocket
// waiting past PressureIdleTimeout, which ends its episode) and only then
// find the client over its own cap. A client within its cap still gets
// that slot, and a client at its cap gets its own waiting connection's.
func TestAClientOverItsCapClosesNoOtherConnection(t *testing.T) {
	p := newConnPool(Edge{MaxConns: 2, MaxConnsPerClient: 1, PressureIdleTimeout: time.Minute}.WithDefaults())
	const a, b, c = "203.0.113.7", "198.51.100.1", "192.0.2.9"
	a1 := holdWorking(t, p, a)
	b1 := holdWorking(t, p, b)
	park(p, b1, time.Hour)
	if got, err := p.accept(pipeFrom(t, a), nil); got != nil || err != nil {
		t.Fatalf("a client at its cap with every connection working got another: %v, %v", got, err)
	}
	if st := p.stats(); isClosed(p, b1) || st.Shed != 0 {
		t.Fatalf("another client's connection was closed for a client over its cap; %v", st)
	}
	c1 := holdWorking(t, p, c)
	if !isClosed(p, b1) {
		t.Fatalf("the waiting connection did not make room for a client within its cap; %v", p.stats())
	}
	park(p, a1, time.Hour)
	a2 := holdWorking(t, p, a)
	if !isClosed(p, a1) || isClosed(p, c1) {
		t.Fatalf("a client at its cap did not get its own waiting connection's slot; %v", p.stats())
	}
	a2.Close()
	c1.Close()
	p.refusals.Wait()
	checkEmpty(t, p)
}

// waitStats waits, within the hang guard, until g's connection caps
// satisfy ok; otherwise it fails with their state.
func waitStats(t *testing.T, g *Guard, what string, ok func(ConnStats) bool) {
	t.Helper()
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	for {
		st := g.ConnStats()
		if ok(st) {
			return
		}
		select {
		case <-st.Changed:
		case <-guard.C:
			t.Fatalf("%s: not within %v; connections: %v", what, hangGuard, st)
		}
	}
}
