package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentworld/agentworld/internal/sim"
)

// CreateSession implements sim.Store.
func (d *DB) CreateSession(ctx context.Context, s sim.SessionRecord, turns []sim.TurnRecord) error {
	rec, err := json.Marshal(s)
	if err != nil {
		return err
	}
	recs := make([][]byte, len(turns))
	for i, t := range turns {
		if recs[i], err = json.Marshal(t); err != nil {
			return err
		}
	}
	var key int64
	err = d.do(ctx, func(ctx context.Context, tx *batchTx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions(id, status, updated_at, record) VALUES(?,?,?,?)`,
			s.ID, s.Status, s.UpdatedAt.UnixMilli(), string(rec)); err != nil {
			return fmt.Errorf("store session %s: %w", s.ID, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO session_status(id, status, updated_at) VALUES(?,?,?)`,
			s.ID, s.Status, s.UpdatedAt.UnixMilli()); err != nil {
			return fmt.Errorf("store session %s: %w", s.ID, err)
		}
		res, err := d.insertKey.ExecContext(ctx, s.ID)
		if err == nil {
			key, err = res.LastInsertId()
		}
		if err != nil {
			return fmt.Errorf("store session %s key: %w", s.ID, err)
		}
		for i, t := range turns {
			if _, err := d.insertTurn.ExecContext(ctx, key, t.Turn, string(recs[i]), nil); err != nil {
				return fmt.Errorf("store session %s turn %d: %w", s.ID, t.Turn, err)
			}
		}
		return nil
	})
	if err == nil {
		d.rememberKey(s.ID, key)
	}
	return err
}

// keyOf returns session id's key, if the cache has it.
func (d *DB) keyOf(id string) (int64, bool) {
	d.keysMu.RLock()
	k, ok := d.keys[id]
	d.keysMu.RUnlock()
	return k, ok
}

// rememberKey caches session id's key, read or written by a committed
// transaction.
func (d *DB) rememberKey(id string, key int64) {
	d.keysMu.Lock()
	if len(d.keys) >= maxCachedKeys {
		clear(d.keys)
	}
	d.keys[id] = key
	d.keysMu.Unlock()
}

// sessionKey looks session id's key up in a write, on the writer's
// connection (sim.ErrNotFound when there is no such session).
func (d *DB) sessionKey(ctx context.Context, id string) (int64, error) {
	var k int64
	if err := d.lookupKey.QueryRowContext(ctx, id).Scan(&k); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("session %s: %w", id, sim.ErrNotFound)
		}
		return 0, fmt.Errorf("store session %s key: %w", id, err)
	}
	return k, nil
}

// AppendTurn implements sim.Store.
func (d *DB) AppendTurn(ctx context.Context, id string, t sim.TurnRecord, status string) error {
	rec, err := encodeRecord(t)
	if err != nil {
		return err
	}
	return d.appendTurn(ctx, id, t.Turn, rec, status)
}

// AppendTurnResult implements sim.ResultAppender: the record is the one
// AppendTurn stores, byte for byte, with the result's encoding reused.
func (d *DB) AppendTurnResult(ctx context.Context, id string, t sim.TurnRecord, result []byte, status string) error {
	rec, err := encodeRecordWith(t, result)
	if err != nil {
		return err
	}
	return d.appendTurn(ctx, id, t.Turn, rec, status)
}

// appendTurn records turn, encoded as rec, and the session's status.
func (d *DB) appendTurn(ctx context.Context, id string, turn int, rec, status string) error {
	now := time.Now().UTC()
	// The write carries what it binds, not t: the text is made here, not on
	// the writer goroutine that every step of a batch waits for.
	key, known := d.keyOf(id)
	w := &write{turn: turnWrite{id: id, key: key, haveKey: known, turn: turn, rec: rec, status: status, now: now}, err: make(chan error, 1)}
	err := d.enqueue(ctx, w)
	if err == nil && !known {
		d.rememberKey(id, w.turn.key) // the writer's, seen after its reply
	}
	return err
}

// encodeRecord is json.Marshal(t) as a string, encoded in a reused buffer:
// one allocation, the string, rather than Marshal's result and its copy.
func encodeRecord(t sim.TurnRecord) (string, error) {
	buf := recordBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 { // an outsized record's buffer is let go
			buf.Reset()
			recordBufs.Put(buf)
		}
	}()
	if err := json.NewEncoder(buf).Encode(t); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// encodeRecordWith is encodeRecord(t) made with result, t.Result as
// sim.EncodeResult wrote it, in place of encoding t.Result again. The
// record's encoder escapes HTML and the reply's does not; the two differ
// only in <, > and & within strings (U+2028 and U+2029 are escaped by
// both), so json.HTMLEscape of the result is what the record's encoder
// writes for it.
func encodeRecordWith(t sim.TurnRecord, result []byte) (string, error) {
	buf := recordBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			recordBufs.Put(buf)
		}
	}()
	// TurnRecord without its last field, Result: an object that always
	// has "turn", so its closing brace is where result goes.
	head := struct {
		Turn int `json:"turn"`
		sim.HistoryTurn
	}{t.Turn, t.HistoryTurn}
	if err := json.NewEncoder(buf).Encode(&head); err != nil {
		return "", err
	}
	buf.Truncate(len(bytes.TrimSuffix(buf.Bytes(), []byte("}\n"))))
	buf.WriteString(`,"result":`)
	json.HTMLEscape(buf, bytes.TrimSuffix(result, []byte("\n")))
	buf.WriteByte('}')
	return buf.String(), nil
}

// isForeignKey reports SQLite's SQLITE_CONSTRAINT_FOREIGNKEY (787): a row
// naming a session that does not exist.
func isForeignKey(err error) bool {
	var se interface{ Code() int }
	return errors.As(err, &se) && se.Code() == 787
}

// SetStatus implements sim.Store.
func (d *DB) SetStatus(ctx context.Context, id, status string) error {
	now := time.Now().UTC()
	return d.do(ctx, func(ctx context.Context, tx *batchTx) error { return d.setStatusIn(ctx, tx, id, status, now) })
}

// setStatusIn records a session's status and last activity in
// session_status, a small row; LoadSession takes both from there (and the
// last turn's time), not from the record JSON.
func (d *DB) setStatusIn(ctx context.Context, tx *batchTx, id, status string, now time.Time) error {
	res, err := d.setStatus.ExecContext(ctx, status, now.UnixMilli(), id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("session %s: %w", id, sim.ErrNotFound)
	}
	return nil
}

// LoadSession implements sim.Store.
func (d *DB) LoadSession(ctx context.Context, id string) (sim.SessionRecord, []sim.TurnRecord, error) {
	var rec sim.SessionRecord
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return rec, nil, err
	}
	defer func() { _ = tx.Rollback() }()
	var raw, status string
	var updated int64
	var key any // the session's key in turn_log: its key, or before version 3 its id
	load, loadTurns := `SELECT st.status, st.updated_at, s.record, k.key FROM sessions s JOIN session_status st ON st.id = s.id JOIN session_keys k ON k.id = s.id WHERE s.id = ?`,
		`SELECT turn, record, at FROM turn_log WHERE session_key = ? ORDER BY turn`
	switch d.version { // below schemaVersion: read-only, before an owner upgraded the file
	case 0:
		load, loadTurns = `SELECT status, updated_at, record, id FROM sessions WHERE id = ?`, `SELECT turn, record, NULL FROM turns WHERE session_id = ? ORDER BY turn`
	case 1:
		load, loadTurns = `SELECT st.status, st.updated_at, s.record, s.id FROM sessions s JOIN session_status st ON st.id = s.id WHERE s.id = ?`,
			`SELECT turn, record, NULL FROM turn_log WHERE session_id = ? ORDER BY turn`
	case 2:
		load, loadTurns = `SELECT st.status, st.updated_at, s.record, s.id FROM sessions s JOIN session_status st ON st.id = s.id WHERE s.id = ?`,
			`SELECT turn, record, at FROM turn_log WHERE session_id = ? ORDER BY turn`
	}
	if err := tx.QueryRowContext(ctx, load, id).Scan(&status, &updated, &raw, &key); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return rec, nil, sim.ErrNotFound
		}
		return rec, nil, fmt.Errorf("load session %s: %w", id, err)
	}
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return rec, nil, fmt.Errorf("session %s: stored record: %w", id, err)
	}
	rec.Status, rec.UpdatedAt = status, time.UnixMilli(updated).UTC()
	if k, ok := key.(int64); ok && !d.readOnly {
		d.rememberKey(id, k) // committed: this read transaction sees it
	}
	rows, err := tx.QueryContext(ctx, loadTurns, key)
	if err != nil {
		return rec, nil, fmt.Errorf("load session %s turns: %w", id, err)
	}
	defer rows.Close()
	var turns []sim.TurnRecord
	for rows.Next() {
		var n int
		var r string
		var at sql.NullInt64
		if err := rows.Scan(&n, &r, &at); err != nil {
			return rec, nil, err
		}
		if at.Valid && at.Int64 > updated {
			updated = at.Int64
			rec.UpdatedAt = time.UnixMilli(updated).UTC()
		}
		var t sim.TurnRecord
		if err := json.Unmarshal([]byte(r), &t); err != nil {
			return rec, nil, fmt.Errorf("session %s turn %d: stored record: %w", id, n, err)
		}
		if t.Turn != len(turns)+1 {
			return rec, nil, fmt.Errorf("session %s: stored turns skip from %d to %d", id, len(turns), t.Turn)
		}
		turns = append(turns, t)
	}
	return rec, turns, rows.Err()
}
