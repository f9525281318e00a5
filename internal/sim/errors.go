package sim

import (
	"errors"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/fielderr"
)

// Sentinel errors, matched with errors.Is; the HTTP layer maps each to a
// status code.
var (
	// ErrUnknownSession: no session with that id exists (404).
	ErrUnknownSession = errors.New("unknown session")
	// ErrUnknownWorld: no world with that name is loaded (404).
	ErrUnknownWorld = errors.New("unknown world")
	// ErrUnknownBackend: the spec or request names a backend nobody
	// registered (400).
	ErrUnknownBackend = errors.New("unknown backend")
	// ErrBadRequest wraps every malformed request; a [fielderr.Error] says
	// which field (400).
	ErrBadRequest = errors.New("bad request")
	// ErrTooLarge: a field exceeds its size limit (413).
	ErrTooLarge = errors.New("too large")
	// ErrCapacity: the server holds its maximum number of sessions (429).
	ErrCapacity = errors.New("session capacity reached")
	// ErrEpisodeOver: the session's episode has ended; fork or start anew
	// (409).
	ErrEpisodeOver = errors.New("episode is over")
	// ErrSessionClosed: the session was deleted or expired (410).
	ErrSessionClosed = errors.New("session closed")
	// ErrTurnConflict: a step names a turn that is neither the next one nor
	// a recorded one with the same action (409).
	ErrTurnConflict = errors.New("turn conflict")
	// ErrSessionExists: a create names a session id that is taken, by an
	// open session or one in the store (409).
	ErrSessionExists = errors.New("session id in use")
	// ErrNotResumable: the backend cannot rebuild the session's environment
	// from its history (after a restart or for a fork) (409).
	ErrNotResumable = errors.New("environment cannot be resumed from history")
	// ErrMoved: another node of a cluster wrote the session since this one
	// loaded it (a shared store's append found a later turn); the session
	// is dropped from memory, and a retry loads it again (503, retryable).
	ErrMoved = errors.New("session moved to another node")
	// ErrStoreUnavailable: a shared store did not answer (no stream leader
	// during an election, a timeout); whether a write took effect is
	// unknown, and the store's expected-sequence check settles it on the
	// retry, so retrying the same turn is safe (503, retryable).
	ErrStoreUnavailable = errors.New("session store unavailable")
	// ErrShuttingDown: the manager is draining (503).
	ErrShuttingDown = errors.New("shutting down")
)

// BadAction turns a malformed action (a [fielderr.Error] of kind
// [conversation.ErrBadAction]) into a bad request naming the same field;
// other errors pass unchanged.
func BadAction(err error) error {
	if !errors.Is(err, conversation.ErrBadAction) {
		return err
	}
	if _, ok := fielderr.As(err); !ok {
		return fielderr.Wrap(ErrBadRequest, "action", err)
	}
	return fielderr.Under(ErrBadRequest, "", err)
}

// badField is the error of a malformed request field: a
// [fielderr.Error] of kind ErrBadRequest.
func badField(field, format string, args ...any) error {
	return fielderr.New(ErrBadRequest, field, format, args...)
}
