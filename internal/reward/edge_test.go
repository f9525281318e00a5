package reward

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
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/httpedge"
)

// serveEdge serves a scorer on a loopback socket through Handler.Serve
// (so the edge's listener and timeouts apply) and returns its address;
// the server drains and stops with the test.
func serveEdge(t *testing.T, ho *HandlerOptions) string {
	t.Helper()
	s, err := New(&Options{Judge: verdictJudge{}, JudgeModel: "test-judge", RetryWait: 1})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	h := mustHandler(t, s, ho)
	go func() { served <- h.Serve(ctx, ln, 5*time.Second) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// rawRequest writes req on a fresh connection and reads the answer, with
// a deadline; the caller closes nothing.
func rawRequest(t *testing.T, addr, req string) (*http.Response, map[string]string, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Minute)) // a hang guard
	start := time.Now()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Error map[string]string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp, body.Error, time.Since(start)
}

// TestRewardServeEdge runs serve's edge checks against reward serve over
// real loopback sockets, on every route: a DNS-rebinding Host and a
// cross-origin page are refused with 403 naming the header (before auth,
// with the operator's hint), a text/plain POST (a form a page may send
// without preflight) with 415, and a declared body over the limit with 413
// before a byte of it is read; an allowed Host and a trainer's plain JSON
// POST pass.
func TestRewardServeEdge(t *testing.T) {
	hint := "set by reward serve --allowed-hosts"
	addr := serveEdge(t, &HandlerOptions{APIKey: "k3y", MaxBodyBytes: 1 << 20, Edge: httpedge.Edge{
		AllowedHosts: []string{"rm.internal"},
		// A body still unread after this long gets 408: a 413 or 401
		// says the body was not read. Three seconds: long beside the pause
		// a loaded machine may put between a dial and the first write.
		ReadTimeout: 3 * time.Second,
		Hints:       map[string]string{httpedge.SettingAllowedHosts: hint},
	}})
	body := `{"items": [{"id": "a", "response": "x", "ground_truth": "x"}]}`
	routes := []string{BatchPath, GetRewardPath, SlimePath, VerifyPath}
	for _, path := range routes {
		t.Run(path, func(t *testing.T) {
			for _, tc := range []struct {
				name, headers, body string
				status              int
				field               string
			}{
				{"rebinding Host", "Host: evil.example:" + strings.Split(addr, ":")[1] + "\r\nAuthorization: Bearer k3y\r\nContent-Type: application/json\r\n", body, 403, "Host"},
				{"cross-origin", "Host: " + addr + "\r\nOrigin: https://evil.example\r\nContent-Type: application/json\r\n", body, 403, "Origin"},
				{"cross-site fetch", "Host: " + addr + "\r\nSec-Fetch-Site: cross-site\r\nAuthorization: Bearer k3y\r\nContent-Type: application/json\r\n", body, 403, "Origin"},
				{"text/plain", "Host: " + addr + "\r\nAuthorization: Bearer k3y\r\nContent-Type: text/plain\r\n", body, 415, "Content-Type"},
				{"no content type", "Host: " + addr + "\r\nAuthorization: Bearer k3y\r\n", body, 415, "Content-Type"},
				{"no auth", "Host: " + addr + "\r\nContent-Type: application/json\r\n", body, 401, "Authorization"},
			} {
				req := fmt.Sprintf("POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s", path, tc.headers, len(tc.body), tc.body)
				resp, e, _ := rawRequest(t, addr, req)
				if resp.StatusCode != tc.status || e["field"] != tc.field {
					t.Errorf("%s: %d %v, want %d on %s", tc.name, resp.StatusCode, e, tc.status, tc.field)
				}
				if !resp.Close {
					t.Errorf("%s: a refused request keeps its connection", tc.name)
				}
				if tc.field == "Host" && !strings.HasSuffix(e["message"], "("+hint+")") {
					t.Errorf("%s: message %q lacks the operator's hint", tc.name, e["message"])
				}
			}
			// Declared over the limit, and not sent: refused at once, unread.
			for _, hdr := range []string{"Authorization: Bearer k3y\r\n", ""} {
				req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", path, addr, hdr, 64<<20)
				resp, e, took := rawRequest(t, addr, req)
				want := 413
				if hdr == "" {
					want = 401
				}
				// Reading the body would end in the read timeout's 408.
				if resp.StatusCode != want {
					t.Errorf("declared 64 MiB body (auth %q): %d %v after %v, want %d before the read timeout", hdr, resp.StatusCode, e, took, want)
				}
			}
			// What the operator allowed, and loopback names, pass.
			for _, host := range []string{"rm.internal:8443", "localhost:1", addr} {
				req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer k3y\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\n\r\n%s", path, host, len(body), body)
				resp, e, _ := rawRequest(t, addr, req)
				if resp.StatusCode == 401 || resp.StatusCode == 403 || resp.StatusCode == 415 || resp.StatusCode == 413 {
					t.Errorf("Host %s: refused at the edge: %d %v", host, resp.StatusCode, e)
				}
			}
		})
	}
	t.Run("slow body", func(t *testing.T) {
		req := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer k3y\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", BatchPath, addr)
		if resp, e, took := rawRequest(t, addr, req); resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("slow body: %d %v after %v, want 408 at the read timeout", resp.StatusCode, e, took)
		}
	})
	t.Run("health", func(t *testing.T) {
		for host, want := range map[string]int{addr: 200, "localhost": 200, "127.0.0.1:80": 200, "rm.internal": 200, "evil.example": 403} {
			resp, e, _ := rawRequest(t, addr, "GET /health HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
			if resp.StatusCode != want {
				t.Errorf("/health with Host %s: %d %v, want %d", host, resp.StatusCode, e, want)
			}
		}
	})
}

// TestRewardServeConnectionLimit: with MaxConns 1, an idle keep-alive
// connection is closed for a new client, a busy one is not: the next
// client waits until it ends.
func TestRewardServeConnectionLimit(t *testing.T) {
	addr := serveEdge(t, &HandlerOptions{Edge: httpedge.Edge{MaxConns: 1}})
	get := func(c net.Conn, wait time.Duration) error {
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		_ = c.SetReadDeadline(time.Now().Add(wait))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1 := dial()
	if err := get(c1, time.Minute); err != nil {
		t.Fatalf("within the limit: %v", err)
	}
	// A request whose body never ends keeps its connection busy.
	busy := dial()
	fmt.Fprintf(busy, "POST "+BatchPath+" HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", addr)
	_ = c1.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := c1.Read(make([]byte, 1)); err == nil {
		t.Fatal("the idle connection was not closed to make room")
	}
	c2 := dial()
	var ne net.Error
	if err := get(c2, 1500*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a client was served beside a busy one: %v", err)
	}
	busy.Close()
	_ = c2.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := http.ReadResponse(bufio.NewReader(c2), nil); err != nil {
		t.Fatalf("the waiting client was not served once the busy one ended: %v", err)
	}
}
