package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/sim"
)

// serveApp serves the embedded default app (every route mounted, /mcp
// included) on a loopback socket with cfg's edge, and returns its base URL.
func serveApp(t *testing.T, opts *Options) string {
	t.Helper()
	base, _ := serveAppServer(t, opts)
	return base
}

// serveAppServer is serveApp with the server, whose connection caps a
// test can watch (s.gate.ConnStats).
func serveAppServer(t *testing.T, opts *Options) (string, *Server) {
	t.Helper()
	_, s := newAppServer(t, app.Config{}, opts)
	return serveEdge(t, s), s
}

// serveEdge serves s (behind its edge: its connection caps hold) on a
// loopback socket until the test ends, and returns the base URL.
func serveEdge(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// edgeRoutes is every route of a served app, with a body that would be
// accepted there (nil for none).
var edgeRoutes = []struct {
	method, path, body string
}{
	{"GET", "/v1/worlds", ""},
	{"GET", "/v1/worlds/python-terminal", ""},
	{"POST", "/v1/sessions", `{"world_id":"python-terminal"}`},
	{"GET", "/v1/sessions/s_x", ""},
	{"DELETE", "/v1/sessions/s_x", ""},
	{"POST", "/v1/sessions/s_x/step", `{"action":"ls"}`},
	{"POST", "/v1/sessions/s_x/fork", `{}`},
	{"POST", "/reset", `{}`},
	{"POST", "/step", `{"action":{"action":"ls"}}`},
	{"GET", "/state", ""},
	{"GET", "/schema", ""},
	{"GET", "/metadata", ""},
	{"GET", "/ws", ""},
	{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`},
	{"POST", "/mcp/perturbed-tracker", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`},
	{"GET", "/mcp/perturbed-tracker", ""},
	{"GET", "/metrics", ""},
}

type edgeReply struct {
	status int
	field  string
	closed bool // the server closes the connection after the reply
}

func edgeDo(t *testing.T, base, method, path, body string, hdr map[string]string) edgeReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var e api.ErrorBody
	_ = json.Unmarshal(raw, &e)
	return edgeReply{status: resp.StatusCode, field: e.Error.Field, closed: resp.Close}
}

// TestEdgeRefusesForeignHostAndCrossOriginOnEveryRoute is the DNS
// rebinding and CSRF table: on every route, a Host that is not this
// server's name and a browser request from another origin are refused
// with 403 naming the header, a text/plain body (a form or fetch a page
// may send without preflight) with 415, all before auth and before the
// body is read; an operator's --allowed-hosts and --allowed-origins open
// exactly what they name.
func TestEdgeRefusesForeignHostAndCrossOriginOnEveryRoute(t *testing.T) {
	base := serveApp(t, &Options{APIKey: "k3y", Edge: Edge{
		AllowedHosts:   []string{"sim.internal:8443", "proxy.example"},
		AllowedOrigins: []string{"https://ui.example"},
	}})
	auth := "Bearer k3y"
	for _, r := range edgeRoutes {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			for _, tc := range []struct {
				name  string
				hdr   map[string]string
				body  string
				want  int
				field string
			}{
				{"foreign host", map[string]string{"Host": "evil.example", "Authorization": auth, "Content-Type": "application/json"}, r.body, 403, "Host"},
				{"rebinding host with our port", map[string]string{"Host": "evil.example:" + strings.Split(base, ":")[2], "Authorization": auth}, r.body, 403, "Host"},
				{"allowed host on another port", map[string]string{"Host": "sim.internal:9999", "Authorization": auth}, r.body, 403, "Host"},
				{"cross-origin", map[string]string{"Origin": "https://evil.example", "Authorization": auth, "Content-Type": "application/json"}, r.body, 403, "Origin"},
				{"null origin", map[string]string{"Origin": "null", "Authorization": auth}, r.body, 403, "Origin"},
				{"cross-site fetch without origin", map[string]string{"Sec-Fetch-Site": "cross-site", "Authorization": auth}, r.body, 403, "Origin"},
				{"cross-origin text/plain without auth", map[string]string{"Origin": "https://evil.example", "Content-Type": "text/plain"}, r.body, 403, "Origin"},
				{"no auth", map[string]string{"Content-Type": "application/json"}, r.body, 401, "Authorization"},
			} {
				got := edgeDo(t, base, r.method, r.path, tc.body, tc.hdr)
				if got.status != tc.want || got.field != tc.field {
					t.Errorf("%s: status %d field %q, want %d %q", tc.name, got.status, got.field, tc.want, tc.field)
				}
				if !got.closed {
					t.Errorf("%s: a refused request keeps its connection", tc.name)
				}
			}
			if r.body != "" {
				for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
					got := edgeDo(t, base, r.method, r.path, r.body, map[string]string{"Authorization": auth, "Content-Type": ct})
					if got.status != 415 || got.field != "Content-Type" {
						t.Errorf("Content-Type %q: status %d field %q, want 415", ct, got.status, got.field)
					}
				}
			}
			// What the operator allowed, and loopback names, pass the edge.
			for _, hdr := range []map[string]string{
				{"Host": "sim.internal:8443"},
				{"Host": "proxy.example:1234"},
				{"Host": "localhost:1"},
				{"Host": "[::1]:8080"},
				{"Origin": "https://ui.example"},
				{"Origin": base},
				{"Sec-Fetch-Site": "same-origin"},
			} {
				hdr["Authorization"], hdr["Content-Type"] = auth, "application/json; charset=utf-8"
				if r.path == "/ws" || (r.method == "GET" && strings.HasPrefix(r.path, "/mcp/")) {
					continue // a plain GET is not an upgrade or an event-stream request; below
				}
				got := edgeDo(t, base, r.method, r.path, r.body, hdr)
				if got.status == 401 || got.status == 403 || got.status == 415 {
					t.Errorf("%v: refused at the edge: %d %s", hdr, got.status, got.field)
				}
			}
		})
	}
}

// TestEdgeWebSocketAndMCPClientsPass runs the real clients through the
// edge: coder/websocket's dialer (what OpenEnv-style WebSocket clients
// send) and the MCP go-sdk's streamable client are served, a WebSocket
// from a foreign origin is not.
func TestEdgeWebSocketAndMCPClientsPass(t *testing.T) {
	base := serveApp(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(base, "http") + "/ws"
	c, _, err := websocket.Dial(ctx, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close(websocket.StatusNormalClosure, "")
	_, resp, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("cross-origin WebSocket: %v %v", err, resp)
	}
	mcpConnect(t, ctx, base+"/mcp/perturbed-tracker", nil)
}

// serve moves the harness from its httptest server to Server.Serve on a
// loopback listener with edge (so the http.Server's timeouts apply), and
// points h.base at it; the server stops with the test.
func (h *harness) serve(edge Edge) {
	t := h.t
	h.srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- New(h.m, &Options{Edge: edge}).Serve(ctx, ln) }()
	t.Cleanup(func() { stop(); <-served })
	h.base = "http://" + ln.Addr().String()
}

// rawConn dials the server and returns the connection with a reader.
func rawConn(t *testing.T, base string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// edgeHangGuard bounds the waits of the edge tests for something the
// server must do by itself (answer, close a connection): far above what
// it takes on a loaded machine, it only turns a hang into a failure.
const edgeHangGuard = time.Minute

// closedWithin reports whether the server closes c (after whatever it
// answers) within d.
func closedWithin(c net.Conn, br *bufio.Reader, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, br)
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

// TestEdgeTimeoutsCloseSlowAndIdleClients holds connections open on a real
// socket the way a slowloris client does: a slow body is cut by the read
// timeout, an idle keep-alive connection by the idle timeout, and an
// unauthenticated body is answered 401 at once, without being read.
func TestEdgeTimeoutsCloseSlowAndIdleClients(t *testing.T) {
	// A second: short beside the hang guards, long beside the pause a
	// loaded machine may put between a dial and the test's first write.
	edge := Edge{ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, IdleTimeout: time.Second}
	base := serveApp(t, &Options{APIKey: "k3y", Edge: edge})
	host := strings.TrimPrefix(base, "http://")

	t.Run("slow body", func(t *testing.T) {
		c, br := rawConn(t, base)
		fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer k3y\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"wor", host)
		// Only the read timeout can end the wait: the body never comes,
		// and the other deadlines are minutes away.
		_ = c.SetReadDeadline(time.Now().Add(edgeHangGuard))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer to a slow body: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("slow body: status %d, want 408", resp.StatusCode)
		}
		if !closedWithin(c, br, edgeHangGuard) {
			t.Error("slow-body connection left open")
		}
	})
	t.Run("unauthenticated body is not read", func(t *testing.T) {
		c, br := rawConn(t, base)
		start := time.Now()
		fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{", host)
		_ = c.SetReadDeadline(time.Now().Add(edgeHangGuard))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// A server reading the body would wait out the read timeout and
		// answer 408: the 401 says it was not read.
		if resp.StatusCode != 401 {
			t.Errorf("unauthenticated slow body: %d after %v, want 401 without reading it", resp.StatusCode, time.Since(start))
		}
		if !closedWithin(c, br, edgeHangGuard) {
			t.Error("connection left open after refusing an unread body")
		}
	})
	t.Run("oversized declared body", func(t *testing.T) {
		c, br := rawConn(t, base)
		fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer k3y\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", host, 64<<20)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("64 MiB declared body: %d, want 413", resp.StatusCode)
		}
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c, br := rawConn(t, base)
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if !closedWithin(c, br, edgeHangGuard) {
			t.Error("idle connection not closed by the idle timeout")
		}
	})
	t.Run("silent connection", func(t *testing.T) {
		c, br := rawConn(t, base)
		if !closedWithin(c, br, edgeHangGuard) {
			t.Error("a connection that never sends a request stays open")
		}
	})
}

// TestEdgeLongStepOutlivesTheTimeouts: a step that thinks far longer than
// the read and write timeouts is answered, on HTTP and on a WebSocket.
func TestEdgeLongStepOutlivesTheTimeouts(t *testing.T) {
	h := newHarness(t, "", nil)
	// Timeouts of a second (a loaded machine may pause the client that
	// long between dialling and writing), steps of three.
	h.serve(Edge{ReadTimeout: time.Second, WriteTimeout: time.Second, IdleTimeout: time.Second})

	var created struct {
		SessionID string `json:"session_id"`
	}
	if st := h.do("POST", "/v1/sessions", `{"world_id":"term"}`, &created); st != 201 {
		t.Fatalf("create: %d", st)
	}
	arrived, release := h.model.Hold()
	go func() { <-arrived; time.Sleep(3 * time.Second); release() }()
	var res sim.StepResult
	if st := h.do("POST", "/v1/sessions/"+created.SessionID+"/step", `{"action":[{"keystrokes":"ls\n"}],"turn":1}`, &res); st != 200 || res.Info.Turn != 1 {
		t.Fatalf("long HTTP step: %d %+v", st, res)
	}

	wctx, cancel := context.WithTimeout(context.Background(), edgeHangGuard)
	defer cancel()
	c, _, err := websocket.Dial(wctx, "ws"+strings.TrimPrefix(h.base, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	wsSend(t, wctx, c, "reset", `{"world_id":"term"}`)
	if typ, _ := wsRecv(t, wctx, c); typ != "observation" {
		t.Fatalf("reset answered %s", typ)
	}
	arrived, release = h.model.Hold()
	go func() { <-arrived; time.Sleep(3 * time.Second); release() }()
	wsSend(t, wctx, c, "step", `{"action":[{"keystrokes":"ls\n"}]}`)
	if typ, data := wsRecv(t, wctx, c); typ != "observation" {
		t.Fatalf("long WebSocket step answered %s %s", typ, data)
	}
}

// TestEdgeConnectionLimit: with MaxConns 2, an idle keep-alive
// connection is closed to make room for a new client; connections busy
// with a request are not, and a client beyond them waits until one ends.
func TestEdgeConnectionLimit(t *testing.T) {
	// The busy connections must stay busy however slowly the test runs:
	// a read timeout far above the hang guards.
	base := serveApp(t, &Options{Edge: Edge{MaxConns: 2, ReadTimeout: 10 * time.Minute}})
	host := strings.TrimPrefix(base, "http://")
	get := func(c net.Conn, br *bufio.Reader, wait time.Duration) error {
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		_ = c.SetReadDeadline(time.Now().Add(wait))
		resp, err := http.ReadResponse(br, nil)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	// busy starts a session create whose body never ends: the server is
	// reading it, within --read-timeout.
	busy := func() net.Conn {
		c, _ := rawConn(t, base)
		fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", host)
		return c
	}
	idle, bi := rawConn(t, base)
	if err := get(idle, bi, edgeHangGuard); err != nil {
		t.Fatalf("within the limit: %v", err)
	}
	b1 := busy()
	c, bc := rawConn(t, base)
	if err := get(c, bc, edgeHangGuard); err != nil {
		t.Fatalf("a client beside an idle and a busy connection: %v", err)
	}
	if !closedWithin(idle, bi, edgeHangGuard) {
		t.Fatal("the idle connection was not closed to make room")
	}
	busy() // takes c's place: c is idle now
	if !closedWithin(c, bc, edgeHangGuard) {
		t.Fatal("the idle connection was not closed to make room")
	}
	w, bw := rawConn(t, base)
	if err := get(w, bw, 1500*time.Millisecond); err == nil {
		t.Fatal("a client was served beside two busy connections")
	}
	b1.Close()
	_ = w.SetReadDeadline(time.Now().Add(edgeHangGuard))
	resp, err := http.ReadResponse(bw, nil)
	if err != nil {
		t.Fatalf("the waiting client was not served once a busy connection ended: %v", err)
	}
	resp.Body.Close()
}

func wsSend(t *testing.T, ctx context.Context, c *websocket.Conn, typ, data string) {
	t.Helper()
	if err := wsjson.Write(ctx, c, api.OpenEnvWSMessage{Type: typ, Data: json.RawMessage(data)}); err != nil {
		t.Fatal(err)
	}
}

func wsRecv(t *testing.T, ctx context.Context, c *websocket.Conn) (string, json.RawMessage) {
	t.Helper()
	var m api.OpenEnvWSMessage
	if err := wsjson.Read(ctx, c, &m); err != nil {
		t.Fatal(err)
	}
	return m.Type, m.Data
}

// mcpConnect connects the MCP go-sdk's streamable client (standalone SSE
// stream on, as long-lived clients run it) and lists the tools.
func mcpConnect(t *testing.T, ctx context.Context, endpoint string, hc *http.Client) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "edge-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("MCP client: %v", err)
	}
	defer cs.Close()
	if lt, err := cs.ListTools(ctx, nil); err != nil || len(lt.Tools) == 0 {
		t.Fatalf("MCP tools %v %v", lt, err)
	}
}

// TestEdgeHealthFollowsTheHostAllowList: /health, /healthz and /ready answer
// without auth, as probes need, but only to this server's names: the
// loopback names and IP literals a probe sends pass, a rebinding name and
// a cross-origin page are refused like on every other route.
func TestEdgeHealthFollowsTheHostAllowList(t *testing.T) {
	base := serveApp(t, &Options{APIKey: "k3y", Edge: Edge{AllowedHosts: []string{"sim.internal"}}})
	port := strings.Split(base, ":")[2]
	for _, path := range []string{"/health", "/healthz", "/ready"} {
		for _, tc := range []struct {
			hdr   map[string]string
			want  int
			field string
		}{
			{map[string]string{}, 200, ""},
			{map[string]string{"Host": "localhost:" + port}, 200, ""},
			{map[string]string{"Host": "127.0.0.1"}, 200, ""},
			{map[string]string{"Host": "sim.internal:" + port}, 200, ""},
			{map[string]string{"Host": "evil.example:" + port}, 403, "Host"},
			{map[string]string{"Origin": "https://evil.example"}, 403, "Origin"},
		} {
			if got := edgeDo(t, base, "GET", path, "", tc.hdr); got.status != tc.want || got.field != tc.field {
				t.Errorf("%s %v: status %d field %q, want %d %q", path, tc.hdr, got.status, got.field, tc.want, tc.field)
			}
		}
	}
}

// TestReadyFollowsOptionsReady: /ready answers 503 with Options.Ready's
// reason while it fails and 200 once it passes, without a token; /health
// stays 200 throughout (the process is alive).
func TestReadyFollowsOptionsReady(t *testing.T) {
	var mu sync.Mutex
	var notReady error = errors.New("node n1 last renewed its lease 4s ago")
	base := serveApp(t, &Options{APIKey: "k3y", Ready: func() error {
		mu.Lock()
		defer mu.Unlock()
		return notReady
	}})
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode, body
	}
	if code, body := get("/ready"); code != http.StatusServiceUnavailable || body["status"] != "not_ready" || body["reason"] != "node n1 last renewed its lease 4s ago" {
		t.Errorf("/ready while not ready: %d %v", code, body)
	}
	if code, _ := get("/health"); code != http.StatusOK {
		t.Errorf("/health while not ready: %d, want 200", code)
	}
	mu.Lock()
	notReady = nil
	mu.Unlock()
	if code, body := get("/ready"); code != http.StatusOK || body["status"] != "ready" {
		t.Errorf("/ready once ready: %d %v", code, body)
	}
}
