package httpedge

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"
)

// Options are what a server adds to its [Edge]: credentials and the body
// bound, which differ between servers.
type Options struct {
	// APIKey, when set, is required as "Authorization: Bearer KEY" by
	// [Guard.Admit]; "" means no auth.
	APIKey string
	// MaxBodyBytes bounds a request body; 0 means 8 MiB.
	MaxBodyBytes int64
	// Logger receives the edge's notices (a listener on every address);
	// nil discards them.
	Logger *slog.Logger
}

// Guard applies an [Edge] to requests and connections. It is safe for
// concurrent use.
type Guard struct {
	edge  Edge
	hosts *hostPolicy
	o     Options
	// key is APIKey as bytes, converted once for the comparison.
	key []byte
	log *slog.Logger
	// conns holds the connections of the guard's listeners.
	conns *connPool
}

// New builds the guard of e (its zero fields defaulted). An allowed host
// or origin that does not parse is an error, as [Edge.Validate] reports.
func New(e Edge, opts *Options) (*Guard, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	e = e.WithDefaults()
	hosts, err := newHostPolicy(e)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Guard{edge: e, hosts: hosts, o: o, key: []byte(o.APIKey), log: log, conns: newConnPool(e)}, nil
}

// Edge is the guard's edge with its defaults filled.
func (g *Guard) Edge() Edge { return g.edge }

// Refusal is a request the edge turned away: the status, the request part
// at fault and a message fit for the client. Its headers (Connection:
// close, WWW-Authenticate) are already set on the response.
type Refusal struct {
	Status int
	// Field is the request part at fault: "Host", "Origin",
	// "Authorization", "Content-Type" or "body".
	Field string
	// Code is a short machine-readable kind: forbidden_host,
	// forbidden_origin, unauthorized, unsupported_media_type, too_large,
	// timeout, bad_request.
	Code string
	// Message is the client-facing text, naming Field.
	Message string
	// Cause is the underlying error, for logs only; nil when none.
	Cause error
}

func (r *Refusal) Error() string {
	if r.Cause != nil {
		return fmt.Sprintf("%d %s: %v", r.Status, r.Message, r.Cause)
	}
	return fmt.Sprintf("%d %s", r.Status, r.Message)
}

func (r *Refusal) Unwrap() error { return r.Cause }

// refuse marks the connection to close (the client's unread body is not
// drained) and returns the refusal.
func refuse(w http.ResponseWriter, status int, field, code, msg string, cause error) *Refusal {
	w.Header().Set("Connection", "close")
	return &Refusal{Status: status, Field: field, Code: code, Message: msg, Cause: cause}
}

// AdmitOpen runs the checks of a route open without auth (/health): Host
// and Origin. A health probe of an orchestrator names the server by a
// loopback name or by IP address, which the default policy admits. It
// reads nothing; nil means admitted.
func (g *Guard) AdmitOpen(w http.ResponseWriter, r *http.Request) *Refusal {
	if !g.hosts.hostAllowed(r.Host) {
		return refuse(w, http.StatusForbidden, "Host", "forbidden_host",
			g.edge.WithHint(fmt.Sprintf("field Host: %q is not a name of this server", r.Host), SettingAllowedHosts), nil)
	}
	if !g.hosts.originAllowed(r) {
		return refuse(w, http.StatusForbidden, "Origin", "forbidden_origin",
			g.edge.WithHint(fmt.Sprintf("field Origin: cross-origin requests from %q are not allowed", r.Header.Get("Origin")), SettingAllowedOrigins), nil)
	}
	return nil
}

// Admit runs the edge checks in an order that reads nothing a refused
// client sent: Host, Origin, auth, content type, declared length. Then it
// reads the body (bounded by MaxBodyBytes and the read timeout), puts what
// it read back as r.Body, and lifts the read deadline so a long handler is
// not cut by it. nil means admitted; a refusal is for the caller to write
// in its own error format.
func (g *Guard) Admit(w http.ResponseWriter, r *http.Request) *Refusal {
	// A keep-alive connection still carries the write deadline of its last
	// reply; clear it so net/http's own writes (100 Continue) are not cut.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	if ref := g.AdmitOpen(w, r); ref != nil {
		return ref
	}
	if g.o.APIKey != "" && !g.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agentworld"`)
		return refuse(w, http.StatusUnauthorized, "Authorization", "unauthorized", "missing or wrong bearer token", nil)
	}
	if !hasBody(r) {
		liftReadDeadline(w)
		return nil
	}
	if stateChanging(r.Method) && !jsonContent(headerValue(r.Header, "Content-Type")) {
		return refuse(w, http.StatusUnsupportedMediaType, "Content-Type", "unsupported_media_type",
			fmt.Sprintf("field Content-Type: %q; send application/json", r.Header.Get("Content-Type")), nil)
	}
	if r.ContentLength > g.o.MaxBodyBytes {
		return refuse(w, http.StatusRequestEntityTooLarge, "body", "too_large",
			fmt.Sprintf("field body: request body of %d bytes exceeds %d bytes", r.ContentLength, g.o.MaxBodyBytes), nil)
	}
	// A declared length is what net/http holds the body to, and it was
	// checked against the bound above, so a body read to that length
	// needs no second limit.
	src := r.Body
	if !declaredSmall(r.ContentLength) {
		src = http.MaxBytesReader(w, r.Body, g.o.MaxBodyBytes)
	}
	body, err := readAll(src, r.ContentLength)
	r.Body.Close()
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return refuse(w, http.StatusRequestTimeout, "body", "timeout", "field body: not received within the read timeout", err)
		case errors.As(err, &mbe):
			return refuse(w, http.StatusRequestEntityTooLarge, "body", "too_large",
				fmt.Sprintf("field body: request body exceeds %d bytes", mbe.Limit), err)
		}
		return refuse(w, http.StatusBadRequest, "body", "bad_request", "field body: the request body could not be read", err)
	}
	b := g.newBody(w)
	b.r.Reset(body)
	b.b = body
	r.Body = b
	liftReadDeadline(w)
	return nil
}

// newBody is the Body that Admit puts back as a request's body: the one
// inside w when w is the guard's own [ResponseWriter] (one allocation per
// request instead of two), else a new one.
func (g *Guard) newBody(w http.ResponseWriter) *Body {
	if rw, ok := w.(*ResponseWriter); ok && !rw.bodyUsed {
		rw.bodyUsed = true
		return &rw.body
	}
	return new(Body)
}

// readAll reads body whole. A declared length (which net/http holds the
// body to, and Admit has checked against the bound) sizes the buffer
// once: a step's body is tens of bytes, and io.ReadAll starts at 512 and
// grows. Past 64 KiB the declaration is not trusted with an allocation
// up front.
func readAll(body io.Reader, declared int64) ([]byte, error) {
	if declaredSmall(declared) {
		b := make([]byte, declared)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(body)
}

// declaredSmall reports whether a declared body length is read in one
// buffer of that size, up to it and no further (see readAll).
func declaredSmall(n int64) bool { return n > 0 && n <= 64<<10 }

// ReadBody returns r's body whole. For a request [Guard.Admit] admitted
// it is the buffer Admit read, taken without a copy.
func ReadBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	if b, ok := r.Body.(*Body); ok {
		return b.Rest(), nil
	}
	return readAll(r.Body, r.ContentLength)
}

// PutBack makes body, which a handler took from r with [ReadBody], r's
// body again, for a handler that passes the request on after reading it
// (a cluster node that forwards it to the session's owner). Behind
// [Guard.Admit] r.Body is Admit's [Body], which is reset to body, so
// nothing is copied or allocated; the forward takes the bytes back with
// [Body.Rest].
func PutBack(r *http.Request, body []byte) {
	b, ok := r.Body.(*Body)
	if !ok {
		b = new(Body)
		r.Body = b
	}
	b.b = body
	b.r.Reset(body)
	r.ContentLength = int64(len(body))
}

// Body is the request body [Guard.Admit] read, put back as r.Body. It
// reads like the original; [Body.Rest] hands a handler what is left of
// it without copying it a second time.
type Body struct {
	r bytes.Reader
	b []byte
}

// Read implements io.Reader.
func (b *Body) Read(p []byte) (int, error) { return b.r.Read(p) }

// Close implements io.Closer; the body is already in memory.
func (b *Body) Close() error { return nil }

// Rest returns the bytes not yet read and consumes them, as io.ReadAll
// would, but without a copy: the slice is the body's own buffer.
func (b *Body) Rest() []byte {
	rest := b.b[len(b.b)-b.r.Len():]
	b.r.Reset(nil)
	return rest
}

func (g *Guard) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(headerValue(r.Header, "Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), g.key) == 1
}

// headerValue is h.Get(key) for a key already in canonical form (every
// key passed here is a constant), without canonicalizing it again on
// every request.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// liftReadDeadline clears the server's ReadTimeout once the request is
// read: when it passed during a long handler or an event stream, net/http's
// background read of the connection would fail and cancel the request's
// context.
func liftReadDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// jsonContent reports whether a Content-Type is JSON: application/json
// or a +json type, parameters allowed.
func jsonContent(ct string) bool {
	if ct == "application/json" { // what clients send; parsing it allocates
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// hasBody reports whether a request carries a body.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// stateChanging reports the methods whose bodies must be JSON.
func stateChanging(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// ResponseWriter records the status for metrics and gives every write a
// deadline of at least 7/8 of WriteTimeout from when it starts, so a client
// that stops reading is dropped while a handler that thinks for minutes, or
// a long event stream, is not cut. Setting a connection's deadline costs a
// timer update in the runtime poller, so it is renewed only once an eighth
// of WriteTimeout has passed since the last renewal: a reply's header and
// body, written microseconds apart, set it once.
type ResponseWriter struct {
	http.ResponseWriter
	// Status is the status written; 200 until WriteHeader.
	Status       int
	writeTimeout time.Duration
	// Start is when the writer was made, as the request began: its
	// monotonic reading times the request and every write (time.Since
	// reads only the monotonic clock, half the cost of time.Now).
	Start time.Time
	// renewed is how long after Start the deadline was last set; set
	// says whether it was.
	renewed time.Duration
	set     bool
	// body is the request body [Guard.Admit] reads, kept here so that
	// the writer and the body are one allocation; bodyUsed says Admit has
	// taken it.
	body     Body
	bodyUsed bool
}

// Writer wraps w for one request under the guard's WriteTimeout.
func (g *Guard) Writer(w http.ResponseWriter) *ResponseWriter {
	return &ResponseWriter{ResponseWriter: w, Status: http.StatusOK, writeTimeout: g.edge.WriteTimeout, Start: time.Now()}
}

func (w *ResponseWriter) deadline() {
	if w.writeTimeout <= 0 {
		return
	}
	now := time.Since(w.Start)
	if w.set && now-w.renewed < w.writeTimeout/8 {
		return
	}
	w.renewed, w.set = now, true
	_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(w.Start.Add(now + w.writeTimeout))
}

// WriteHeader records code and writes it within the write deadline.
func (w *ResponseWriter) WriteHeader(code int) {
	w.Status = code
	w.deadline()
	w.ResponseWriter.WriteHeader(code)
}

// Write writes b within the write deadline.
func (w *ResponseWriter) Write(b []byte) (int, error) {
	w.deadline()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController and WebSocket upgrades reach the
// underlying writer (hijacking, flushing).
func (w *ResponseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
