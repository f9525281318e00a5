package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/httpedge"
	"github.com/agentworld/agentworld/internal/jetstore"
)

// hang bounds a wait that only a bug makes long.
const hang = time.Minute

// forwarding is a node ("me") routing session s1 to owner, served over
// HTTP like a node's listener; it returns the node's URL and its router.
func forwarding(t *testing.T, owner string) (string, *Router) {
	t.Helper()
	r := New(&owners{self: "me", leases: map[string]jetstore.Lease{"s1": lease("a", owner, "model", 3, true)}}, nil)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if handled, err := r.Route(w, req, "s1"); err != nil || !handled {
			http.Error(w, "not forwarded: "+errString(err), http.StatusInternalServerError)
		}
	}))
	t.Cleanup(front.Close)
	return front.URL, r
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestForwardCarriesTheRequest: the owner gets the client's method, path,
// query, Host, body and end-to-end headers, this node's mark, and none of
// the client's hop-by-hop or proxy headers; the client gets the owner's
// status, headers and body; every forward goes over one kept-alive
// connection.
func TestForwardCarriesTheRequest(t *testing.T) {
	type seen struct {
		Method, URI, Host, Body, Mark string
		Header                        map[string]string
	}
	var got []seen
	var conns atomic.Int32
	owner := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h := map[string]string{}
		for _, k := range []string{"Authorization", "Keep-Alive", "X-Drop", "X-Forwarded-For", "X-Keep"} {
			if v := r.Header.Get(k); v != "" {
				h[k] = v
			}
		}
		got = append(got, seen{r.Method, r.RequestURI, r.Host, string(b), r.Header.Get(ForwardedHeader), h})
		w.Header().Set("X-Owner", "a")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"served":"`+r.URL.Path+`"}`)
	}))
	owner.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	owner.Start()
	t.Cleanup(owner.Close)
	front, _ := forwarding(t, owner.URL)

	var want []seen
	for i, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		body := ""
		if method == http.MethodPost {
			body = `{"action":"ls","turn":1}`
		}
		req, _ := http.NewRequest(method, front+"/v1/sessions/s1/step?x=1&y=%2F", strings.NewReader(body))
		req.Host = "sim.example"
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("X-Keep", "kept")
		req.Header.Set("X-Drop", "dropped")
		req.Header.Set("Connection", "X-Drop")
		req.Header.Set("Keep-Alive", "timeout=5")
		req.Header.Set("X-Forwarded-For", "10.1.1.1")
		req.Header.Set(ForwardedHeader, "") // the client's own is replaced
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-Owner") != "a" || string(b) != `{"served":"/v1/sessions/s1/step"}` ||
			resp.ContentLength != int64(len(b)) {
			t.Fatalf("request %d: status %d, X-Owner %q, length %d, body %q", i, resp.StatusCode, resp.Header.Get("X-Owner"), resp.ContentLength, b)
		}
		want = append(want, seen{method, "/v1/sessions/s1/step?x=1&y=%2F", "sim.example", body, "me",
			map[string]string{"Authorization": "Bearer t", "X-Keep": "kept"}})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what the owner saw (-want +got):\n%s", diff)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the forwards opened %d connections to the owner, want 1 kept alive", n)
	}
}

// TestForwardRedialsAClosedConnection: a kept-alive connection the owner
// closed while it was idle is not used; the request goes over a new one.
func TestForwardRedialsAClosedConnection(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(owner.Close)
	front, r := forwarding(t, owner.URL)
	get := func() {
		t.Helper()
		resp, err := http.Get(front + "/v1/sessions/s1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "ok" {
			t.Fatalf("status %d, body %q", resp.StatusCode, b)
		}
	}
	get()
	host := strings.TrimPrefix(owner.URL, "http://")
	r.fwd.mu.Lock()
	idle := append([]*nodeConn(nil), r.fwd.idle[host]...)
	r.fwd.mu.Unlock()
	if len(idle) != 1 {
		t.Fatalf("%d idle connections to the owner, want 1", len(idle))
	}
	owner.CloseClientConnections()
	// The owner's close reaches this end when the kernel delivers it.
	for deadline := time.Now().Add(hang); !idle[0].closedByPeer(); {
		if time.Now().After(deadline) {
			t.Skip("the owner's close never showed on the idle connection (no peek on this system)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	get()
}

// TestForwardStreams: an answer of unknown length reaches the client as
// the owner writes it, not when it ends.
func TestForwardStreams(t *testing.T) {
	second := make(chan struct{})
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-second:
		case <-time.After(hang):
		}
		_, _ = io.WriteString(w, "second\n")
	}))
	t.Cleanup(owner.Close)
	front, _ := forwarding(t, owner.URL)
	resp, err := http.Post(front+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(second)
	if line, err := br.ReadString('\n'); err != nil || line != "second\n" {
		t.Fatalf("second line %q, %v", line, err)
	}
}

// TestForwardEndsWithTheClient: a client that goes away while the owner
// works closes the forward's connection, which the owner sees as its
// request's end.
func TestForwardEndsWithTheClient(t *testing.T) {
	started, ended := make(chan struct{}), make(chan struct{})
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then net/http watches the connection
		close(started)
		select {
		case <-r.Context().Done():
			close(ended)
		case <-time.After(hang):
		}
	}))
	t.Cleanup(owner.Close)
	front, _ := forwarding(t, owner.URL)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, front+"/v1/sessions/s1/step", strings.NewReader(`{}`))
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("client error %v, want canceled", err)
	}
	select {
	case <-ended:
	case <-time.After(hang):
		t.Fatal("the owner's request did not end after its client went away")
	}
}

// TestForwardOthersByProxy: requests the forwarder leaves to
// ReverseProxy (a body of unknown length, an event stream) are forwarded
// all the same.
func TestForwardOthersByProxy(t *testing.T) {
	var viaForwarder []bool
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, r.Method+" "+string(b)+" by "+r.Header.Get(ForwardedHeader))
	}))
	t.Cleanup(owner.Close)
	target, _ := url.Parse(owner.URL)
	r := New(&owners{self: "me", leases: map[string]jetstore.Lease{"s1": lease("a", owner.URL, "model", 3, true)}}, nil)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		viaForwarder = append(viaForwarder, canForward(req, target))
		if handled, err := r.Route(w, req, "s1"); err != nil || !handled {
			http.Error(w, "not forwarded: "+errString(err), http.StatusInternalServerError)
		}
	}))
	t.Cleanup(front.Close)
	postThreeWays(t, front.URL+"/mcp")
	if diff := cmp.Diff([]bool{false, false, true}, viaForwarder); diff != "" {
		t.Errorf("through the forwarder: chunked, event stream, plain (-want +got):\n%s", diff)
	}
}

// postThreeWays posts the JSON body "ab" to url chunked, asking for an
// event stream, and plainly (the first two go by ReverseProxy, the last
// through the forwarder), and checks that each answer is the echoing
// owner's.
func postThreeWays(t *testing.T, url string) {
	t.Helper()
	chunked, _ := http.NewRequest(http.MethodPost, url, io.MultiReader(strings.NewReader("a"), strings.NewReader("b")))
	stream, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("ab"))
	stream.Header.Set("Accept", "application/json, text/event-stream")
	plain, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("ab"))
	for i, req := range []*http.Request{chunked, stream, plain} {
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "POST ab by me"; string(b) != want {
			t.Errorf("%s, request %d (chunked, event stream, plain): answer %q, want %q", url, i, b, want)
		}
	}
}

// TestForwardTakesTheEdgesBody: behind the edge, whose Admit has read
// the body, every way of forwarding carries it whole, whether the handler
// left it unread or read it and put it back (as the OpenEnv handlers do
// to find the session); the forwarder sends the edge's own buffer rather
// than a copy of it.
func TestForwardTakesTheEdgesBody(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, r.Method+" "+string(b)+" by "+r.Header.Get(ForwardedHeader))
	}))
	t.Cleanup(owner.Close)
	guard, err := httpedge.New(httpedge.Edge{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := New(&owners{self: "me", leases: map[string]jetstore.Lease{"s1": lease("a", owner.URL, "model", 3, true)}}, nil)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		gw := guard.Writer(w)
		if ref := guard.Admit(gw, req); ref != nil {
			http.Error(w, ref.Message, ref.Status)
			return
		}
		if req.URL.Query().Has("read") {
			body, err := httpedge.ReadBody(req)
			if err != nil {
				t.Error(err)
			}
			httpedge.PutBack(req, body)
		}
		if handled, err := r.Route(gw, req, "s1"); err != nil || !handled {
			http.Error(w, "not forwarded: "+errString(err), http.StatusInternalServerError)
		}
	}))
	t.Cleanup(front.Close)
	postThreeWays(t, front.URL+"/mcp")
	postThreeWays(t, front.URL+"/mcp?read")

	sent := []byte(`{"action":"ls"}`)
	req := httptest.NewRequest(http.MethodPost, "/v1/sessions/s1/step", nil)
	httpedge.PutBack(req, sent)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	body, err := requestBody(req, bp)
	if err != nil || string(body) != string(sent) || &body[0] != &sent[0] {
		t.Errorf("requestBody gave %q (%v), want the edge's buffer %q itself", body, err, sent)
	}

	// A body a handler read part of, and did not put back, is not sent
	// cut short: it fails as a body that ended early.
	req = httptest.NewRequest(http.MethodPost, "/v1/sessions/s1/step", nil)
	httpedge.PutBack(req, sent)
	if _, err := io.ReadFull(req.Body, make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	if body, err := requestBody(req, bp); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("requestBody of a partly read body gave %q (%v), want io.ErrUnexpectedEOF", body, err)
	}
}

// TestForwardFollowsTheOwnersAddress: the owners' URLs parsed once per
// address do not outlive a change of address (a node restarted elsewhere,
// a session now owned by another node), an address that does not parse
// is refused every time, and the parsed URLs kept stay few.
func TestForwardFollowsTheOwnersAddress(t *testing.T) {
	answering := func(name string) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, name)
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	own := &owners{self: "me", leases: map[string]jetstore.Lease{}}
	r := New(own, nil)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if handled, err := r.Route(w, req, "s1"); err != nil || !handled {
			http.Error(w, "not forwarded: "+errString(err), http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(front.Close)
	a, b := answering("a"), answering("b")
	var got []string
	for _, addr := range []string{a, b, a, "http://", a} {
		own.leases["s1"] = lease("n", addr, "model", 3, true)
		resp, err := http.Get(front.URL + "/v1/sessions/s1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = append(got, strings.Fields(string(body))[0])
	}
	if diff := cmp.Diff([]string{"a", "b", "a", "not", "a"}, got); diff != "" {
		t.Errorf("answers as the owner's address changed (-want +got):\n%s", diff)
	}
	for i := range 3 * maxTargets {
		addr := fmt.Sprintf("http://127.0.0.1:%d", 1000+i)
		u, err := r.target("s1", lease("n", addr, "model", 3, true))
		if err != nil || u.Host != addr[len("http://"):] {
			t.Fatalf("%s: target %v, %v", addr, u, err)
		}
	}
	if n := len(r.targets); n > maxTargets {
		t.Errorf("%d parsed owner URLs kept, want at most %d", n, maxTargets)
	}
}
