package worldmodel

import (
	"bytes"
	"io"
	"net/http/httptrace"
	"sync/atomic"
)

// Knowing when net/http is done with a request body.
//
// A session's step sends its whole history, a body of kilobytes that is
// the previous step's body plus one exchange. Encoding each step into a
// new buffer costs an allocation and a copy of the history per step (the
// largest allocation of a step in serve); writing the next step into the
// memory after the previous prefix (encodeChatBody) needs to know that
// net/http reads the previous body no more. net/http does not say so for
// a body it sends in one write with the headers (a *bytes.Reader: a body
// of its own type would tell when it is closed, but net/http flushes the
// headers of such a body apart, two writes a request), and it may read a
// body after Client.Do returns (it writes the request while it waits for
// the answer, and a server may answer first).
//
// What it does say, through httptrace: each connection it gets for the
// request over HTTP/1 (GotConn) writes the request at most once, and
// WroteRequest follows each write, after the last read of the body. So
// once the request's attempts are over (no connection is got after), as
// many finished writes as connections mean nothing reads the body. Where
// the body may be read in other ways — a copy of the request for a
// redirect, a body rewound for a retry through GetBody, HTTP/2 — its
// memory is never written again. The client follows bodies only through
// its own transport to an http:// URL (HTTP/1 alone), and only when the
// caller's context has no trace of its own.

// bodyUse follows net/http's reading of one request body.
type bodyUse struct {
	trace httptrace.ClientTrace
	conns atomic.Int32 // connections got for the request
	wrote atomic.Int32 // writes of the request finished
	// over is set when the request's attempts are over.
	over atomic.Bool
	// forsaken is set when the body may be read in a way not counted.
	forsaken atomic.Bool
}

func newBodyUse() *bodyUse {
	u := &bodyUse{}
	u.trace.GotConn = func(httptrace.GotConnInfo) { u.conns.Add(1) }
	u.trace.WroteRequest = func(httptrace.WroteRequestInfo) { u.wrote.Add(1) }
	return u
}

// free reports whether nothing reads the body any more; false for a nil
// u. Once true it stays true: no connection is got after over is set, and
// forsaken is set only while Client.Do runs.
func (u *bodyUse) free() bool {
	return u != nil && u.over.Load() && !u.forsaken.Load() && u.wrote.Load() == u.conns.Load()
}

// getBody is the request's GetBody, which net/http calls to send the body
// again (a redirect, a retry after the body was read): the copy it makes
// reads the memory in a way not counted.
func (u *bodyUse) getBody(body []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		u.forsaken.Store(true)
		return io.NopCloser(bytes.NewReader(body)), nil
	}
}
