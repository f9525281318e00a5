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
	base, s := serveAppServer(t, &Options{Edge: Edge{MaxConns: 3, PressureIdleTimeout: 200 * time.Millisecond}})
	host := strings.TrimPrefix(base, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()
	// names are the WebSockets by the client's address, which the
	// connection caps show as the remote one.
	names := map[*websocket.Conn]string{}
	dial := func(name string) *websocket.Conn {
		t.Helper()
		var local net.Addr
		tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				local = c.LocalAddr()
			}
			return c, err
		}}
		c, _, err := websocket.Dial(ctx, "ws://"+host+"/ws", &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseNow() })
		names[c] = fmt.Sprintf("%s (%v)", name, local)
		return c
	}
	// alive: the WebSocket still answers a message.
	alive := func(c *websocket.Conn) bool {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, edgeHangGuard)
		defer cancel()
		if err := c.Write(wctx, websocket.MessageText, []byte(`{"type":"state"}`)); err != nil {
			return false
		}
		_, data, err := c.Read(wctx)
		return err == nil && strings.Contains(string(data), "reset")
	}
	// closed: the server closed the WebSocket (a read fails within the
	// hang guard rather than timing out).
	closed := func(c *websocket.Conn) bool {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, edgeHangGuard)
		defer cancel()
		_, _, err := c.Read(rctx)
		return err != nil && rctx.Err() == nil
	}
	get := func() {
		t.Helper()
		c, br := rawConn(t, base)
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		_ = c.SetReadDeadline(time.Now().Add(edgeHangGuard))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("a new client beside a full cap was not answered: %v; connections: %v", err, s.gate.ConnStats())
		}
		resp.Body.Close()
	}

	// The cap full of WebSockets that send nothing, each waiting for its
	// client before the next opens (the server marks one waiting after
	// its client has the upgrade, so opening the next at once could make
	// it the one waiting longest): a new client is answered, and the one
	// that waited longest is closed for it.
	var ws []*websocket.Conn
	for i := range 3 {
		ws = append(ws, dial(fmt.Sprintf("w%d", i+1)))
		waitConns(t, s, fmt.Sprintf("WebSocket %d waiting", i+1), func(st httpedge.ConnStats) bool {
			return st.Held == i+1 && st.Parked() == i+1
		})
	}
	w1, w2, w3 := ws[0], ws[1], ws[2]
	before := s.gate.ConnStats()
	get()
	if !closed(w1) {
		t.Fatalf("%s, the WebSocket waiting longest, was not closed for the new client; connections before it came: %v; now: %v", names[w1], before, s.gate.ConnStats())
	}
	for _, w := range []*websocket.Conn{w2, w3} {
		if !alive(w) {
			t.Fatalf("%s was closed, not the one waiting longest; connections before the client came: %v; now: %v", names[w], before, s.gate.ConnStats())
		}
	}

	// An idle keep-alive connection (the client just answered) goes
	// before a WebSocket: the next client takes its slot, and both
	// WebSockets stay.
	waitConns(t, s, "the answered client's connection idle", func(st httpedge.ConnStats) bool {
		return len(st.Quiet) > st.Parked()
	})
	before = s.gate.ConnStats()
	get()
	for _, w := range []*websocket.Conn{w2, w3} {
		if !alive(w) {
			t.Fatalf("%s was closed while an idle keep-alive connection could make room; connections before the client came: %v; now: %v", names[w], before, s.gate.ConnStats())
		}
	}
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
