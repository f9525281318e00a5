package server

import (
	"net/http"

	"github.com/agentworld/agentworld/internal/httpedge"
)

// Edge bounds what reaches the handlers: allowed Host and Origin headers,
// timeouts, the connection limit and the hints that name the operator's
// settings in refusals. It is [httpedge.Edge], shared with reward serve;
// the zero value of every field is the safe default.
type Edge = httpedge.Edge

// admit runs the edge checks (see [httpedge.Guard.Admit]): Host, Origin,
// auth, content type and declared length before any body byte is read,
// then the bounded body. On refusal it has written the response and
// returns false.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) bool {
	return s.proceed(w, r, s.gate.Admit(w, r))
}

// admitOpen runs the checks of a route open without auth (/health): Host
// and Origin.
func (s *Server) admitOpen(w http.ResponseWriter, r *http.Request) bool {
	return s.proceed(w, r, s.gate.AdmitOpen(w, r))
}

// proceed writes ref, when there is one, in the server's error format and
// reports whether the request may go on.
func (s *Server) proceed(w http.ResponseWriter, r *http.Request, ref *httpedge.Refusal) bool {
	if ref == nil {
		return true
	}
	s.writeError(w, r, &Error{Status: ref.Status, Public: ref.Message, Field: ref.Field, Code: ref.Code, Cause: ref.Cause})
	return false
}
