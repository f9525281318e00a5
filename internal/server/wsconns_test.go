package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentworld/agentworld/internal/cluster"
	"github.com/agentworld/agentworld/internal/httpedge"
)

// TestIdleWebSocketsDoNotLockOut is the lock-out issue 21's connection
// work left open: WebSockets counted as busy for as long as they were
// open, so a client holding --max-conns idle WebSockets (up to
// --ws-idle-timeout, 30 minutes) kept every other client waiting. Now a
// WebSocket between messages is waiting for its client, and a new client
// that finds the cap full gets the slot of the one waiting longest (once
// it has waited --pressure-idle-timeout), after any idle keep-alive
// connection, which goes first since closing it loses nothing.
func TestIdleWebSocketsDoNotLockOut(t *testing.T) {
	k := newWSKit(t, 3)
	s := k.s
	// The cap full of WebSockets that send nothing, each waiting for its
	// client before the next opens (the server marks one waiting after
	// its client has the upgrade, so opening the next at once could make
	// it the one waiting longest): a new client is answered, and the one
	// that waited longest is closed for it.
	w1, w2, w3 := k.dialWaiting("w1"), k.dialWaiting("w2"), k.dialWaiting("w3")
	before := s.gate.ConnStats()
	k.get()
	if !k.closed(w1) {
		t.Fatalf("%s, the WebSocket waiting longest, was not closed for the new client; connections before it came: %v; now: %v", k.names[w1], before, s.gate.ConnStats())
	}
	for _, w := range []*websocket.Conn{w2, w3} {
		if !k.alive(w) {
			t.Fatalf("%s was closed, not the one waiting longest; connections before the client came: %v; now: %v", k.names[w], before, s.gate.ConnStats())
		}
	}

	// An idle keep-alive connection (the client just answered) goes
	// before a WebSocket: the next client takes its slot, and both
	// WebSockets stay.
	waitConns(t, s, "the answered client's connection idle", func(st httpedge.ConnStats) bool {
		return len(st.Quiet) > st.Parked()
	})
	before = s.gate.ConnStats()
	k.get()
	for _, w := range []*websocket.Conn{w2, w3} {
		if !k.alive(w) {
			t.Fatalf("%s was closed while an idle keep-alive connection could make room; connections before the client came: %v; now: %v", k.names[w], before, s.gate.ConnStats())
		}
	}
}

// TestAWebSocketMessageArrivingIsNotCut: a WebSocket whose client has
// begun sending a message (a large one, whose first frame is in) is
// working, though it waited longest before: a new client finding the
// cap full takes the slot of the other, waiting one, and the message is
// answered once it is all in. It used to count as waiting until the whole
// message had been read, and was closed mid-message.
func TestAWebSocketMessageArrivingIsNotCut(t *testing.T) {
	k := newWSKit(t, 2)
	s := k.s
	w1, w2 := k.dialWaiting("w1"), k.dialWaiting("w2")
	wr, err := w1.Writer(k.ctx, websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	// Leading white space is valid JSON; 64 KiB fills the client's write
	// buffer, so the first frame goes out now.
	if _, err := wr.Write([]byte(strings.Repeat(" ", 64<<10))); err != nil {
		t.Fatal(err)
	}
	waitConns(t, s, k.names[w1]+" working once its message began", func(st httpedge.ConnStats) bool {
		return st.Held == 2 && st.Parked() == 1
	})
	before := s.gate.ConnStats()
	k.get()
	if !k.closed(w2) {
		t.Fatalf("%s, waiting, was not closed for the new client; connections before it came: %v; now: %v", k.names[w2], before, s.gate.ConnStats())
	}
	if _, err := wr.Write([]byte(`{"type":"state"}`)); err != nil {
		t.Fatalf("%s was closed with its message half sent: %v; connections before the client came: %v", k.names[w1], err, before)
	}
	if err := wr.Close(); err != nil {
		t.Fatalf("%s was closed with its message half sent: %v; connections before the client came: %v", k.names[w1], err, before)
	}
	rctx, cancel := context.WithTimeout(k.ctx, edgeHangGuard)
	defer cancel()
	if _, data, err := w1.Read(rctx); err != nil || !strings.Contains(string(data), "reset") {
		t.Fatalf("%s's message was not answered: %q, %v; connections before the client came: %v; now: %v", k.names[w1], data, err, before, s.gate.ConnStats())
	}
}

// TestAProxiedWebSocketIsMarkedAsItWorks: a WebSocket attached to a
// session another node owns (its messages carried to the owner) waits
// for its client once the owner has answered, and works from the first
// frame of the client's next message until the owner's answer.
func TestAProxiedWebSocketIsMarkedAsItWorks(t *testing.T) {
	b := newHarness(t, "", nil)
	a := newHarness(t, "", &Options{Sessions: cluster.New(fakeOwners{addr: b.srv.URL}, nil), Edge: Edge{MaxConns: 4}})
	if code := b.do("POST", "/reset", map[string]any{"episode_id": "x", "world_id": "term"}, nil); code != http.StatusOK {
		t.Fatalf("reset on the owner: %d", code)
	}
	base := serveEdge(t, a.s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	parked := func(want int) func(httpedge.ConnStats) bool {
		return func(st httpedge.ConnStats) bool { return st.Held == 1 && st.Parked() == want }
	}
	read := func(what string) string {
		t.Helper()
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("%s: %v; connections: %v", what, err, a.s.gate.ConnStats())
		}
		return string(data)
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"reset","data":{"session_id":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	if got := read("attach"); !strings.Contains(got, `"attached":true`) {
		t.Fatalf("attach through the other server: %s", got)
	}
	waitConns(t, a.s, "the attached WebSocket waiting once the owner answered", parked(1))
	wr, err := c.Writer(ctx, websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wr.Write([]byte(strings.Repeat(" ", 64<<10))); err != nil {
		t.Fatal(err)
	}
	waitConns(t, a.s, "the attached WebSocket working once a message began", parked(0))
	if _, err := wr.Write([]byte(`{"type":"step","data":{"action":[{"keystrokes":"ls\n","duration":0.1}]}}`)); err != nil {
		t.Fatal(err)
	}
	if err := wr.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read("step"); !strings.Contains(got, `"turn":1`) {
		t.Fatalf("step on the proxied WebSocket: %s", got)
	}
	waitConns(t, a.s, "the attached WebSocket waiting once the owner answered the step", parked(1))
}

// wsKit serves the app with a connection cap for the WebSocket tests,
// and holds their clients.
type wsKit struct {
	t     *testing.T
	s     *Server
	base  string
	host  string
	ctx   context.Context
	names map[*websocket.Conn]string // by the client's address, which ConnStats shows as the remote one
}

func newWSKit(t *testing.T, maxConns int) *wsKit {
	t.Helper()
	base, s := serveAppServer(t, &Options{Edge: Edge{MaxConns: maxConns, PressureIdleTimeout: 200 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	t.Cleanup(cancel)
	return &wsKit{t: t, s: s, base: base, host: strings.TrimPrefix(base, "http://"), ctx: ctx, names: map[*websocket.Conn]string{}}
}

// dialWaiting opens a WebSocket and waits for the server to mark it
// waiting for its client, so WebSockets opened one after another wait
// in that order.
func (k *wsKit) dialWaiting(name string) *websocket.Conn {
	k.t.Helper()
	parked := k.s.gate.ConnStats().Parked() + 1
	var local net.Addr
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			local = c.LocalAddr()
		}
		return c, err
	}}
	c, _, err := websocket.Dial(k.ctx, "ws://"+k.host+"/ws", &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(func() { c.CloseNow() })
	k.names[c] = fmt.Sprintf("%s (%v)", name, local)
	waitConns(k.t, k.s, k.names[c]+" waiting", func(st httpedge.ConnStats) bool { return st.Parked() == parked })
	return c
}

// alive: the WebSocket still answers a message.
func (k *wsKit) alive(c *websocket.Conn) bool {
	k.t.Helper()
	wctx, cancel := context.WithTimeout(k.ctx, edgeHangGuard)
	defer cancel()
	if err := c.Write(wctx, websocket.MessageText, []byte(`{"type":"state"}`)); err != nil {
		return false
	}
	_, data, err := c.Read(wctx)
	return err == nil && strings.Contains(string(data), "reset")
}

// closed: the server closed the WebSocket (a read fails within the hang
// guard rather than timing out).
func (k *wsKit) closed(c *websocket.Conn) bool {
	k.t.Helper()
	rctx, cancel := context.WithTimeout(k.ctx, edgeHangGuard)
	defer cancel()
	_, _, err := c.Read(rctx)
	return err != nil && rctx.Err() == nil
}

// get is a new client's GET /health on a connection of its own, kept
// open after the answer.
func (k *wsKit) get() {
	k.t.Helper()
	c, br := rawConn(k.t, k.base)
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", k.host)
	_ = c.SetReadDeadline(time.Now().Add(edgeHangGuard))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		k.t.Fatalf("a new client beside a full cap was not answered: %v; connections: %v", err, k.s.gate.ConnStats())
	}
	resp.Body.Close()
}

// waitConns waits, within the hang guard, until the server's connection
// caps satisfy ok; otherwise it fails with their state.
func waitConns(t *testing.T, s *Server, what string, ok func(httpedge.ConnStats) bool) {
	t.Helper()
	guard := time.NewTimer(edgeHangGuard)
	defer guard.Stop()
	for {
		st := s.gate.ConnStats()
		if ok(st) {
			return
		}
		select {
		case <-st.Changed:
		case <-guard.C:
			t.Fatalf("%s: not within %v; connections: %v", what, edgeHangGuard, st)
		}
	}
}

// TestIdleEventStreamsDoNotLockOut: an MCP client's standalone event
// stream (GET on the streamable endpoint) held its connection as busy for
// as long as the client kept it, so a cap full of them kept everyone out.
// It now counts as waiting for its client: a new client takes the slot of
// the one that waited longest.
func TestIdleEventStreamsDoNotLockOut(t *testing.T) {
	base, s := serveAppServer(t, &Options{Edge: Edge{MaxConns: 3, PressureIdleTimeout: 200 * time.Millisecond}})
	host := strings.TrimPrefix(base, "http://")
	// One event stream per session (the SDK allows one): initialize one.
	initialize := func() string {
		t.Helper()
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp/perturbed-tracker", strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Close = true // no keep-alive connection left behind
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("initialize: %v; connections: %v", err, s.gate.ConnStats())
		}
		resp.Body.Close()
		session := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || session == "" {
			t.Fatalf("initialize: %d, session %q", resp.StatusCode, session)
		}
		return session
	}
	var streams int
	stream := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		session := initialize()
		// The server closes the initialize's connection after its
		// client has the answer: wait for that, so it holds no slot
		// (a new client would otherwise wait for it rather than take a
		// stream's).
		waitConns(t, s, "the initialize's connection closed", func(st httpedge.ConnStats) bool { return st.Held == streams })
		c, br := rawConn(t, base)
		fmt.Fprintf(c, "GET /mcp/perturbed-tracker HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-06-18\r\n\r\n", host, session)
		_ = c.SetReadDeadline(time.Now().Add(edgeHangGuard))
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("event stream: %v %v; connections: %v", resp, err, s.gate.ConnStats())
		}
		streams++
		return c, br
	}
	firstConn, first := stream()
	stream()
	stream()
	// Each stream is marked waiting before its answer starts.
	if st := s.gate.ConnStats(); st.Held != 3 || st.Parked() != 3 {
		t.Fatalf("three event streams open: %v", st)
	}
	c, br := rawConn(t, base)
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	_ = c.SetReadDeadline(time.Now().Add(edgeHangGuard))
	if resp, err := http.ReadResponse(br, nil); err != nil {
		t.Fatalf("a new client beside a cap full of event streams was not answered: %v; connections: %v", err, s.gate.ConnStats())
	} else {
		resp.Body.Close()
	}
	// The longest-waiting stream was closed for it: reading it ends
	// rather than timing out (the deadline is set afresh: the one set when
	// the stream opened may have passed on a loaded machine by now).
	_ = firstConn.SetReadDeadline(time.Now().Add(edgeHangGuard))
	_, err := io.Copy(io.Discard, first)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the stream that waited longest (%v) is still open; connections: %v", firstConn.LocalAddr(), s.gate.ConnStats())
	}
}
