package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentworld/agentworld/internal/sim"
)

// Reading for a browser of sessions: pages of sessions and of one
// session's turns, so neither the session list nor a long transcript is
// ever loaded whole.

// errOldSchema refuses browsing a database a newer owner has not yet
// upgraded (opened read-only before the upgrade).
var errOldSchema = errors.New("the session database has an older schema: open it once with serve to upgrade it")

// SessionSummary is one session of a page of sessions: its record without
// spec and prompts, its current status and its number of turns.
type SessionSummary struct {
	ID, Parent, Root, World, Domain, Backend, Model, Status string
	CreatedAt, UpdatedAt                                    time.Time
	Turns                                                   int
}

// ListSessions returns a page of sessions, the most recently created first.
func (d *DB) ListSessions(ctx context.Context, offset, limit int) ([]SessionSummary, error) {
	return d.summaries(ctx, `ORDER BY k.key DESC LIMIT ? OFFSET ?`, limit, offset)
}

// SessionFamily returns every session of root's fork tree (root included),
// oldest first.
func (d *DB) SessionFamily(ctx context.Context, root string) ([]SessionSummary, error) {
	return d.summaries(ctx, `WHERE s.id = ? OR json_extract(s.record, '$.root') = ? ORDER BY k.key LIMIT -1 OFFSET 0`, root, root)
}

func (d *DB) summaries(ctx context.Context, tail string, args ...any) ([]SessionSummary, error) {
	if d.version != schemaVersion {
		return nil, errOldSchema
	}
	q := `SELECT s.id, st.status, st.updated_at, json_extract(s.record, '$.parent'), json_extract(s.record, '$.root'),
		json_extract(s.record, '$.world'), json_extract(s.record, '$.domain'), json_extract(s.record, '$.backend'),
		json_extract(s.record, '$.model'), json_extract(s.record, '$.created_at'),
		(SELECT count(*) FROM turn_log t WHERE t.session_key = k.key)
		FROM sessions s JOIN session_status st ON st.id = s.id JOIN session_keys k ON k.id = s.id ` + tail
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store %s: list sessions: %w", d.path, err)
	}
	defer rows.Close()
	var out []SessionSummary
	for rows.Next() {
		var s SessionSummary
		var updated int64
		var parent, root, world, dom, backend, model, created sql.NullString
		if err := rows.Scan(&s.ID, &s.Status, &updated, &parent, &root, &world, &dom, &backend, &model, &created, &s.Turns); err != nil {
			return nil, err
		}
		s.Parent, s.Root, s.World, s.Domain, s.Backend, s.Model = parent.String, root.String, world.String, dom.String, backend.String, model.String
		s.UpdatedAt = time.UnixMilli(updated).UTC()
		s.CreatedAt, _ = time.Parse(time.RFC3339Nano, created.String)
		out = append(out, s)
	}
	return out, rows.Err()
}

// TurnsPage returns a session's record and the turns numbered from..from+
// limit−1 (1-based), with the session's number of turns: a transcript of
// any length is read one page at a time. It returns sim.ErrNotFound for an
// unknown id.
func (d *DB) TurnsPage(ctx context.Context, id string, from, limit int) (sim.SessionRecord, []sim.TurnRecord, int, error) {
	var rec sim.SessionRecord
	if d.version != schemaVersion {
		return rec, nil, 0, errOldSchema
	}
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return rec, nil, 0, err
	}
	defer func() { _ = tx.Rollback() }()
	var raw, status string
	var updated, key int64
	err = tx.QueryRowContext(ctx, `SELECT st.status, st.updated_at, s.record, k.key FROM sessions s JOIN session_status st ON st.id = s.id JOIN session_keys k ON k.id = s.id WHERE s.id = ?`, id).
		Scan(&status, &updated, &raw, &key)
	if errors.Is(err, sql.ErrNoRows) {
		return rec, nil, 0, sim.ErrNotFound
	}
	if err != nil {
		return rec, nil, 0, fmt.Errorf("load session %s: %w", id, err)
	}
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return rec, nil, 0, fmt.Errorf("session %s: stored record: %w", id, err)
	}
	rec.Status, rec.UpdatedAt = status, time.UnixMilli(updated).UTC()
	var total int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM turn_log WHERE session_key = ?`, key).Scan(&total); err != nil {
		return rec, nil, 0, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT turn, record FROM turn_log WHERE session_key = ? AND turn >= ? ORDER BY turn LIMIT ?`, key, max(from, 1), limit)
	if err != nil {
		return rec, nil, 0, err
	}
	defer rows.Close()
	var turns []sim.TurnRecord
	for rows.Next() {
		var n int
		var r string
		if err := rows.Scan(&n, &r); err != nil {
			return rec, nil, 0, err
		}
		var t sim.TurnRecord
		if err := json.Unmarshal([]byte(r), &t); err != nil {
			return rec, nil, 0, fmt.Errorf("session %s turn %d: stored record: %w", id, n, err)
		}
		turns = append(turns, t)
	}
	return rec, turns, total, rows.Err()
}
