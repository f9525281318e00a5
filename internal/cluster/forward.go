package cluster

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/httpedge"
)

// A forward is most of what a cluster costs beyond one node when clients
// spread their requests over the nodes: with three nodes two in three
// requests reach a node that does not own their session. net/http's
// Transport under httputil.ReverseProxy spends a forward's CPU on two
// goroutines per connection (one writes the request, one reads the
// answer, each woken through a channel) and a deep copy of the request
// and its headers. A forward
// of a request with a known, small body (every step, state, reset and
// JSON-RPC request) goes instead through [forwarder]: the handler's own
// goroutine writes the request with its body in one write to a kept-alive
// connection to the owner and reads the answer back from it, so a
// forward costs one write and one read more than serving the request
// here. Anything else (a body of unknown or large size, an upgrade, an
// event stream the client asks for, a node reached over TLS or through a
// caller's Transport) takes the ReverseProxy.

// maxForwardBody is the largest request body [forwarder] sends from
// memory (the edge's buffer, or read here); a larger one is streamed by
// ReverseProxy.
const maxForwardBody = 1 << 20

// idleConnMaxAge is how long a kept-alive connection to another node may
// wait unused before it is closed rather than used: under the nodes' edge
// idle timeout (httpedge.DefaultIdleTimeout). A connection its owner
// closed sooner (an edge under pressure sheds idle connections) is found
// closed before it is used (see peerCheck).
const idleConnMaxAge = 30 * time.Second

// forwarder carries requests to other nodes over kept-alive HTTP/1.1
// connections it reads and writes in the calling goroutine.
type forwarder struct {
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle int // idle connections kept per node

	mu   sync.Mutex
	idle map[string][]*nodeConn // by host:port, most recently used last
}

// newForwarder dials nodes with dial (the ReverseProxy's transport's, so
// both ways to a node connect alike).
func newForwarder(dial func(ctx context.Context, network, addr string) (net.Conn, error), maxIdle int) *forwarder {
	return &forwarder{dial: dial, maxIdle: maxIdle, idle: map[string][]*nodeConn{}}
}

// nodeConn is one connection to another node.
type nodeConn struct {
	net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	since time.Time // when it was put back idle
	// closedByPeer reports whether the other end closed the connection
	// while it was idle (see peerCheck).
	closedByPeer func() bool
	// abort ends the request in flight on the connection, its client
	// having gone away; made once, as closedByPeer, so a request does not
	// allocate it.
	abort func()
}

// neverClosed is peerCheck's check of a connection that cannot be peeked
// at (peer_linux.go, peer_other.go).
func neverClosed() bool { return false }

// expire fails the connection's reads and writes at once.
func (c *nodeConn) expire() { c.SetDeadline(time.Unix(1, 0)) }

// get is an idle connection to host that is still open, or a new one.
func (f *forwarder) get(ctx context.Context, host string) (*nodeConn, error) {
	now := time.Now()
	for {
		f.mu.Lock()
		l := f.idle[host]
		if len(l) == 0 {
			f.mu.Unlock()
			break
		}
		c := l[len(l)-1]
		l[len(l)-1] = nil
		f.idle[host] = l[:len(l)-1]
		if now.Sub(c.since) >= idleConnMaxAge {
			// every connection below it is older still
			f.idle[host] = nil
			f.mu.Unlock()
			c.Close()
			for _, o := range l[:len(l)-1] {
				o.Close()
			}
			break
		}
		f.mu.Unlock()
		if !c.closedByPeer() {
			return c, nil
		}
		c.Close()
	}
	nc, err := f.dial(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	c := &nodeConn{Conn: nc, closedByPeer: peerCheck(nc)}
	c.br, c.bw = bufio.NewReaderSize(nc, 4<<10), bufio.NewWriterSize(nc, 4<<10)
	c.abort = c.expire
	return c, nil
}

// put keeps c for the next request to host, or closes it when enough are
// kept.
func (f *forwarder) put(host string, c *nodeConn) {
	c.since = time.Now()
	f.mu.Lock()
	if l := f.idle[host]; len(l) < f.maxIdle {
		f.idle[host] = append(l, c)
		c = nil
	}
	f.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// canForward reports whether req to target can go through [forwarder].
func canForward(req *http.Request, target *url.URL) bool {
	return target.Scheme == "http" && (target.Path == "" || target.Path == "/") && target.RawQuery == "" &&
		req.ContentLength >= 0 && req.ContentLength <= maxForwardBody &&
		req.Header.Get("Upgrade") == "" && !strings.Contains(req.Header.Get("Accept"), "text/event-stream")
}

// bufPool holds request bodies and answer copy buffers.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// bodyError: the client's request body could not be read, so the client
// failed, not the owner.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "read the request's body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// forward sends req to the owner at target and writes its answer to w.
// mark is this node's name for [ForwardedHeader]; forget is called when
// the owner refuses (503). An error before anything was written means the
// owner did not answer; after the answer began the client's connection is
// aborted, as ReverseProxy does.
func (f *forwarder) forward(w http.ResponseWriter, req *http.Request, target *url.URL, mark string, forget func()) error {
	bp := bufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 {
			bufPool.Put(bp)
		}
	}()
	body, err := requestBody(req, bp)
	if err != nil {
		return err
	}
	c, err := f.get(req.Context(), target.Host)
	if err != nil {
		return err
	}
	// A client that goes away ends the wait for the owner and the copy.
	stop := context.AfterFunc(req.Context(), c.abort)
	resp, err := roundTrip(c, req, body, mark)
	if err != nil {
		stop()
		c.Close()
		return err
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		forget()
	}
	h := w.Header()
	named := resp.Header["Connection"]
	for k, v := range resp.Header {
		if !hopHeader(k) && !namedIn(named, k) {
			h[k] = v
		}
	}
	for k := range resp.Trailer {
		h.Add("Trailer", k)
	}
	w.WriteHeader(resp.StatusCode)
	buf := (*bp)[:cap(*bp)] // at least bufPool's 8 KiB
	var flush func() error
	if resp.ContentLength < 0 {
		// streamed as the owner writes it
		flush = http.NewResponseController(w).Flush
	}
	err = copyAnswer(w, resp.Body, buf, flush)
	if !stop() || err != nil || resp.Close || c.br.Buffered() > 0 {
		c.Close()
	} else {
		f.put(target.Host, c)
	}
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	for k, v := range resp.Trailer {
		h[http.TrailerPrefix+k] = v
	}
	return nil
}

// requestBody is req's body whole. Behind the edge it is the buffer
// [httpedge.Guard.Admit] read (or a handler put back, [httpedge.PutBack]),
// taken without a copy; otherwise it is read into *bp, grown to fit. A
// body a handler read part of without putting it back is short of its
// length and fails as a body that ended early would, never forwarded
// cut.
func requestBody(req *http.Request, bp *[]byte) ([]byte, error) {
	if b, ok := req.Body.(*httpedge.Body); ok {
		rest := b.Rest()
		if req.ContentLength >= 0 && int64(len(rest)) != req.ContentLength {
			return nil, &bodyError{io.ErrUnexpectedEOF}
		}
		return rest, nil
	}
	n := int(req.ContentLength)
	if n <= 0 {
		return nil, nil
	}
	if cap(*bp) < n {
		*bp = make([]byte, 0, n)
	}
	body := (*bp)[:n]
	if _, err := io.ReadFull(req.Body, body); err != nil {
		return nil, &bodyError{err}
	}
	return body, nil
}

// copyAnswer copies the owner's answer body to the client, flushing after
// every piece when flush is set.
func copyAnswer(w io.Writer, body io.Reader, buf []byte, flush func() error) error {
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if flush != nil {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// roundTrip writes req (with body) to c and reads the answer's header.
func roundTrip(c *nodeConn, req *http.Request, body []byte, mark string) (*http.Response, error) {
	if err := writeRequest(c.bw, req, body, mark); err != nil {
		return nil, err
	}
	for {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Body.Close()
			return nil, errors.New("the owner switched protocols on a plain request")
		}
		if resp.StatusCode >= 200 {
			return resp, nil
		}
		// 1xx: an interim answer; the final one follows
	}
}

// writeRequest writes req as an HTTP/1.1 request with body, the client's
// end-to-end headers and this node's mark, and flushes it: one write.
func writeRequest(bw *bufio.Writer, req *http.Request, body []byte, mark string) error {
	bw.WriteString(req.Method)
	bw.WriteByte(' ')
	bw.WriteString(req.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(req.Host)
	bw.WriteString("\r\n")
	named := req.Header["Connection"] // headers the client's Connection names are this hop's
	for k, vs := range req.Header {
		if hopHeader(k) || requestHeader(k) || namedIn(named, k) {
			continue
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n") {
				continue
			}
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString(ForwardedHeader)
	bw.WriteString(": ")
	bw.WriteString(mark)
	if len(body) > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
		bw.WriteString("\r\nContent-Length: ")
		bw.WriteString(strconv.Itoa(len(body)))
	}
	bw.WriteString("\r\n\r\n")
	bw.Write(body)
	return bw.Flush()
}

// hopHeader reports whether header k belongs to one connection (RFC 9110
// section 7.6.1), so it is not carried over a hop.
func hopHeader(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// requestHeader reports whether a client's header k is one the forward
// writes itself (the body's length; an Expect the body, read already,
// answered), one a proxy adds, which the owner must not take from the
// client (as ReverseProxy's Rewrite drops them), or this node's mark.
func requestHeader(k string) bool {
	switch k {
	case "Content-Length", "Expect", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", ForwardedHeader:
		return true
	}
	return false
}

// namedIn reports whether the Connection header values name header k.
func namedIn(connection []string, k string) bool {
	for _, v := range connection {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" && http.CanonicalHeaderKey(f) == k {
				return true
			}
		}
	}
	return false
}
