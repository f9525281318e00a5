package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/route"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

// TestErrorKinds: every sentinel maps by the one table to its status, code
// and retryability, and the client's message never carries the internal
// chain (here a host path wrapped around the sentinel).
func TestErrorKinds(t *testing.T) {
	type reply struct {
		Status     int
		Code       string
		Public     string
		Field      string
		RetryAfter time.Duration
	}
	const secret = "open /srv/secret/sessions.db"
	tests := []struct {
		name string
		err  error
		want reply
	}{
		{"unknown session", fielderr.New(sim.ErrUnknownSession, "session_id", "no session %q", "s1"),
			reply{404, "not_found", `field session_id: no session "s1"`, "session_id", 0}},
		{"episode over, wrapped", fmt.Errorf("%s: %w", secret, sim.ErrEpisodeOver),
			reply{409, "episode_over", "episode is over", "", 0}},
		{"capacity", fmt.Errorf("%s: %w", secret, sim.ErrCapacity),
			reply{429, "capacity", "session capacity reached", "", 5 * time.Second}},
		{"no replica", fmt.Errorf("%s: %w", secret, route.ErrNoReplica),
			reply{503, "unavailable", "world model unavailable; retry later (the step was not recorded, so retrying the same turn is safe)", "", 5 * time.Second}},
		{"inline world", fielderr.Under(sim.ErrBadRequest, "world", fielderr.New(world.ErrInvalid, "domain", "missing")),
			reply{400, "bad_request", "field world.domain: missing", "world.domain", 0}},
		{"world spec without request kind", fmt.Errorf("%s: %w", secret, fielderr.New(world.ErrInvalid, "max_turns", "negative")),
			reply{400, "bad_request", "field max_turns: negative", "max_turns", 0}},
		{"deadline", fmt.Errorf("%s: %w", secret, context.DeadlineExceeded),
			reply{504, "timeout", "step timed out", "", 0}},
		{"unknown", errors.New(secret),
			reply{500, "internal", "internal error", "", 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := toError(tc.err)
			got := reply{e.Status, e.Code, e.Public, e.Field, e.RetryAfter}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !errors.Is(e, tc.err) && e.Cause != tc.err {
				t.Errorf("the cause is lost: %v", e.Cause)
			}
		})
	}
	for _, k := range errorKinds {
		if k.status < 400 || k.code == "" {
			t.Errorf("%v: status %d code %q", k.err, k.status, k.code)
		}
		if k.retryAfter > 0 && k.status != http.StatusTooManyRequests && k.status != http.StatusServiceUnavailable {
			t.Errorf("%v: retryable with status %d", k.err, k.status)
		}
	}
}
