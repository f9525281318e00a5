package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/cluster"
	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Error is what a handler fails with: the HTTP status, the message the
// client may see, the field at fault, and the internal cause (logged, never
// sent).
type Error struct {
	Status int
	// Public is the client-facing message.
	Public string
	// Field names the request field at fault, when one is.
	Field string
	// Code is a short machine-readable kind ("bad_request", "unavailable", …).
	Code string
	// RetryAfter, when > 0, marks the error retryable and is sent as the
	// Retry-After header.
	RetryAfter time.Duration
	// Setting names the operator's setting that decided the error (a
	// [fielderr.Error.Setting]); the reply carries its hint from
	// [Edge.Hints]. "" means none.
	Setting string
	Cause   error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Public, e.Cause)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Public)
}

func (e *Error) Unwrap() error { return e.Cause }

// badRequest makes a 400 naming a field.
func badRequest(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = "field " + field + ": " + msg
	}
	return &Error{Status: http.StatusBadRequest, Public: msg, Field: field, Code: "bad_request"}
}

// errorKinds is the one table from sentinel errors to their HTTP form; the
// first entry the error matches (errors.Is) wins, so specific kinds come
// before the general ones they wrap (route.ErrNoReplica wraps
// worldmodel.ErrUnavailable). public, when set, is the message clients
// get; otherwise they get the field error's path and problem
// ([fielderr.Error.Public]) or the sentinel's own text, never the
// internal chain, which goes to the log.
var errorKinds = []struct {
	err    error
	status int
	code   string
	// retryAfter > 0 marks the error retryable and is sent as Retry-After.
	retryAfter time.Duration
	public     string
}{
	{err: sim.ErrUnknownSession, status: http.StatusNotFound, code: "not_found"},
	{err: sim.ErrUnknownWorld, status: http.StatusNotFound, code: "not_found"},
	{err: sim.ErrTooLarge, status: http.StatusRequestEntityTooLarge, code: "too_large"},
	{err: sim.ErrUnknownBackend, status: http.StatusBadRequest, code: "bad_request"},
	{err: sim.ErrBadRequest, status: http.StatusBadRequest, code: "bad_request"},
	{err: world.ErrInvalid, status: http.StatusBadRequest, code: "bad_request"},
	{err: sim.ErrTurnConflict, status: http.StatusConflict, code: "turn_conflict"},
	{err: sim.ErrSessionExists, status: http.StatusConflict, code: "session_exists"},
	{err: sim.ErrEpisodeOver, status: http.StatusConflict, code: "episode_over"},
	{err: sim.ErrNotResumable, status: http.StatusConflict, code: "not_resumable"},
	{err: sim.ErrMoved, status: http.StatusServiceUnavailable, code: "session_moved", retryAfter: time.Second,
		public: "session moved to another node while this step ran; it was not recorded here, so retrying the same turn is safe"},
	{err: sim.ErrStoreUnavailable, status: http.StatusServiceUnavailable, code: "store_unavailable", retryAfter: time.Second,
		public: "the session store did not answer; retrying the same turn is safe"},
	{err: cluster.ErrCannotMove, status: http.StatusConflict, code: "cannot_move"},
	{err: cluster.ErrOwnerUnreachable, status: http.StatusServiceUnavailable, code: "owner_unreachable", retryAfter: time.Second},
	{err: sim.ErrSessionClosed, status: http.StatusGone, code: "session_closed"},
	{err: sim.ErrCapacity, status: http.StatusTooManyRequests, code: "capacity", retryAfter: 5 * time.Second},
	{err: sim.ErrShuttingDown, status: http.StatusServiceUnavailable, code: "shutting_down", retryAfter: time.Second},
	{err: worldmodel.ErrUnavailable, status: http.StatusServiceUnavailable, code: "unavailable", retryAfter: 5 * time.Second,
		public: "world model unavailable; retry later (the step was not recorded, so retrying the same turn is safe)"},
	{err: worldmodel.ErrRejected, status: http.StatusBadGateway, code: "model_rejected", public: "world model rejected the request"},
	{err: context.DeadlineExceeded, status: http.StatusGatewayTimeout, code: "timeout", public: "step timed out"},
	{err: context.Canceled, status: 499, code: "canceled", public: "request canceled"},
}

// toError maps a manager or backend error to its HTTP form by errorKinds;
// an error of no kind there is a 500 whose public message says nothing of
// its cause.
func toError(err error) *Error {
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Field: "body", Code: "too_large",
			Public: fmt.Sprintf("field body: request body exceeds %d bytes", mbe.Limit), Cause: err}
	}
	for _, k := range errorKinds {
		if !errors.Is(err, k.err) {
			continue
		}
		e := &Error{Status: k.status, Code: k.code, RetryAfter: k.retryAfter, Public: k.public, Cause: err}
		if fe, ok := fielderr.As(err); ok {
			e.Field, e.Setting = fe.Path, fe.Setting
			if e.Public == "" {
				e.Public = fe.Public()
			}
		}
		if e.Public == "" {
			e.Public = k.err.Error()
		}
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Public: "internal error", Code: "internal", Cause: err}
}

// clientError is toError with the hint of the setting that decided the
// error, when the operator gave one (Edge.Hints).
func (s *Server) clientError(err error) *Error {
	e := toError(err)
	if e.Setting == "" {
		return e
	}
	c := *e // toError may return err itself
	c.Public = s.edge.WithHint(e.Public, e.Setting)
	return &c
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := s.clientError(err)
	if e.Status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	} else {
		s.log.Debug("request rejected", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	var b api.ErrorBody
	b.Error.Message, b.Error.Field, b.Error.Code, b.Error.Retryable = e.Public, e.Field, e.Code, e.RetryAfter > 0
	writeJSON(w, e.Status, b)
}
