package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentworld/agentworld/internal/sim"
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
	// RetryAfter, when > 0, is sent as the Retry-After header.
	RetryAfter time.Duration
	Cause      error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Public, e.Cause)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Public)
}

func (e *Error) Unwrap() error { return e.Cause }

// errorBody is the JSON shape of every error response.
type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Field   string `json:"field,omitempty"`
		Code    string `json:"code"`
	} `json:"error"`
}

// badRequest makes a 400 naming a field.
func badRequest(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = "field " + field + ": " + msg
	}
	return &Error{Status: http.StatusBadRequest, Public: msg, Field: field, Code: "bad_request"}
}

// toError maps a manager or backend error to its HTTP form.
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
	var fe *sim.FieldError
	field, public := "", err.Error()
	if errors.As(err, &fe) {
		field, public = fe.Field, fe.Error()
	}
	mk := func(status int, code string, retry time.Duration) *Error {
		return &Error{Status: status, Public: public, Field: field, Code: code, RetryAfter: retry, Cause: err}
	}
	switch {
	case errors.Is(err, sim.ErrUnknownSession), errors.Is(err, sim.ErrUnknownWorld):
		return mk(http.StatusNotFound, "not_found", 0)
	case errors.Is(err, sim.ErrTooLarge):
		return mk(http.StatusRequestEntityTooLarge, "too_large", 0)
	case errors.Is(err, sim.ErrBadRequest), errors.Is(err, sim.ErrUnknownBackend):
		return mk(http.StatusBadRequest, "bad_request", 0)
	case errors.Is(err, sim.ErrTurnConflict):
		return mk(http.StatusConflict, "turn_conflict", 0)
	case errors.Is(err, sim.ErrEpisodeOver):
		return mk(http.StatusConflict, "episode_over", 0)
	case errors.Is(err, sim.ErrNotResumable):
		return mk(http.StatusConflict, "not_resumable", 0)
	case errors.Is(err, sim.ErrSessionClosed):
		return mk(http.StatusGone, "session_closed", 0)
	case errors.Is(err, sim.ErrCapacity):
		return mk(http.StatusTooManyRequests, "capacity", 5*time.Second)
	case errors.Is(err, sim.ErrShuttingDown):
		return mk(http.StatusServiceUnavailable, "shutting_down", time.Second)
	case errors.Is(err, worldmodel.ErrUnavailable):
		e := mk(http.StatusServiceUnavailable, "unavailable", 5*time.Second)
		e.Public = "world model unavailable; retry later (the step was not recorded, so retrying the same turn is safe)"
		return e
	case errors.Is(err, worldmodel.ErrRejected):
		e := mk(http.StatusBadGateway, "model_rejected", 0)
		e.Public = "world model rejected the request"
		return e
	case errors.Is(err, context.DeadlineExceeded):
		e := mk(http.StatusGatewayTimeout, "timeout", 0)
		e.Public = "step timed out"
		return e
	case errors.Is(err, context.Canceled):
		return mk(499, "canceled", 0)
	}
	return &Error{Status: http.StatusInternalServerError, Public: "internal error", Code: "internal", Cause: err}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toError(err)
	if e.Status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	} else {
		s.log.Debug("request rejected", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	var b errorBody
	b.Error.Message, b.Error.Field, b.Error.Code = e.Public, e.Field, e.Code
	writeJSON(w, e.Status, b)
}
