package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/world"
)

// ErrNoTurns marks a stored session that took no step: a trajectory needs
// at least one turn.
var ErrNoTurns = errors.New("session has no turns")

// sessionsPage is how many sessions are listed per query.
const sessionsPage = 500

// FromSessions writes every session of a serve session database as a
// unified trajectory (one JSONL line each, oldest first), exactly as GET
// /v1/sessions/{id} answers it: the world's components and rendered
// system prompt, each turn with its step info, the session's facts in
// meta. A last action answered by nothing (one that ended the episode)
// is dropped, as data does for every trajectory. The database is opened
// read-only, so a running serve may hold it. Sessions no client can see (the private roots of fork groups) are
// left out; one with no turns, or whose stored spec does not decode, is a
// bad record under opts' policy (named db:session-id).
func FromSessions(ctx context.Context, dbPath string, out io.Writer, opts datapipe.Options) (*datapipe.Summary, error) {
	sum := &datapipe.Summary{Files: 1}
	start := time.Now()
	defer func() { sum.Elapsed = time.Since(start) }()
	if _, err := os.Stat(dbPath); err != nil {
		return sum, fmt.Errorf("session database %s: %w (give --db, the file serve used)", dbPath, err)
	}
	db, err := store.OpenReadOnly(dbPath)
	if err != nil {
		return sum, err
	}
	defer db.Close()
	var ids []string
	for off := 0; ; off += sessionsPage {
		page, err := db.ListSessions(ctx, off, sessionsPage)
		if err != nil {
			return sum, err
		}
		for _, s := range page {
			ids = append(ids, s.ID)
		}
		if len(page) < sessionsPage {
			break
		}
	}
	slices.Reverse(ids) // listed newest first
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		rec, turns, err := db.LoadSession(ctx, id)
		if err != nil {
			return sum, err
		}
		if rec.Private {
			continue
		}
		sum.Lines++
		bad := func(err error) error {
			return opts.Bad(sum, &datapipe.RecordError{File: dbPath, Line: int(sum.Lines), Field: "session " + id, Err: err})
		}
		var spec world.Spec
		if err := json.Unmarshal(rec.Spec, &spec); err != nil {
			if err := bad(fmt.Errorf("%w: stored world spec: %v", datapipe.ErrInvalid, err)); err != nil {
				return sum, err
			}
			continue
		}
		if len(turns) == 0 {
			if err := bad(fmt.Errorf("%w: %w", datapipe.ErrInvalid, ErrNoTurns)); err != nil {
				return sum, err
			}
			continue
		}
		t := sim.SessionTrajectory(rec, &spec, turns)
		t.TrimUnanswered() // an action that ended the episode, answered by nothing
		if errs := t.Check(); len(errs) > 0 {
			if err := bad(fmt.Errorf("%w: %s: %v", datapipe.ErrInvalid, errs[0].Path, errs[0].Err)); err != nil {
				return sum, err
			}
			continue
		}
		sum.Records++
		if err := writeTrajectory(out, t); err != nil {
			return sum, err
		}
		sum.Written++
	}
	return sum, nil
}
