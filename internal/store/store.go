// Package store keeps simulator sessions and their transcripts in an
// embedded SQLite database (pure Go, WAL mode), so sessions survive a
// restart and a crash leaves every acknowledged step intact. Writes from
// concurrent sessions are group-committed: one transaction, and so one
// fsync of the log, carries every write that arrived while the previous
// one was committing, and each write is acknowledged only once its
// transaction is on disk.
package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/agentworld/agentworld/internal/filelock"
	"github.com/agentworld/agentworld/internal/sim"
)

// maxBatch bounds the writes one transaction carries.
const maxBatch = 256

// maxYields bounds the scheduling rounds the writer waits for a batch to
// fill (see DB.writer); past a few, batches grow no more.
const maxYields = 8

// DB is a sim.Store on a SQLite file.
type DB struct {
	path   string
	lock   *filelock.Lock
	db     *sql.DB
	writes chan *write
	done   chan struct{}

	mu       sync.RWMutex // guards closed against sends on writes
	closed   bool
	readOnly bool // OpenReadOnly: no writer, no lock

	// commits and committed count transactions and the writes they carried
	// (the group commit benchmark reports their ratio).
	commits, committed atomic.Int64
	// beforeCommit, when set (tests only), sees each batch's size before
	// it commits.
	beforeCommit func(n int)

	// version is the schema version read by LoadSession: schemaVersion,
	// or 0 for a database opened read-only before an owner upgraded it.
	version int
	// wconn is the writer's own connection, held from Open to Close (nil
	// when read-only), and the statements it runs, prepared on it once.
	// The writer begins and ends its transactions with statements of its
	// own rather than database/sql's Tx: a Tx takes a connection from the
	// pool, has the driver compile BEGIN and COMMIT anew and binds each
	// prepared statement to itself, every batch.
	wconn                                                 *sql.Conn
	begin, commitTx, rollback                             *sql.Stmt
	savepoint, rollbackTo, release, setStatus, insertTurn *sql.Stmt
	insertKey, lookupKey                                  *sql.Stmt
	// insertTurns[i] inserts turnChunks[i] turns; args is the writer's
	// reused argument list for them.
	insertTurns [len(turnChunks)]*sql.Stmt
	args        []any

	// keys caches sessions' keys (session_keys.key by id), each put there
	// once the transaction that wrote or read it committed; a step of a
	// session it lacks looks the key up on the writer's connection.
	keysMu sync.RWMutex
	keys   map[string]int64
}

// maxCachedKeys bounds DB.keys; past it the cache starts afresh, and the
// sessions still stepping are looked up again, once each.
const maxCachedKeys = 1 << 16

// write is one queued write: fn, or, when fn is nil, a step's turn, which
// the writer inserts together with the other turns of its batch.
type write struct {
	fn   func(ctx context.Context, tx *batchTx) error
	turn turnWrite
	err  chan error
}

// turnWrite is a step's turn record and the session's status after it.
type turnWrite struct {
	id     string
	key    int64 // the session's key when haveKey
	turn   int
	rec    string
	status string
	now    time.Time // the step's time: turn_log.at and the status's time

	haveKey bool
}

// turnChunks are the numbers of rows the writer's multi-row turn inserts
// carry (DB.insertTurns), largest first: a batch's run of turns is
// inserted with as few statements as these sizes allow, rather than one
// statement (one trip through database/sql, the driver and the VDBE's
// setup) per turn.
var turnChunks = [...]int{64, 16, 4, 1}

var _ sim.Store = (*DB)(nil)

// The schema, version 3 (PRAGMA user_version). A step writes the least it
// can, because every page it dirties is written to the log, checksummed,
// fsynced and later checkpointed: it appends its turn record, with its
// time, to turn_log, in arrival order, so the turns of a batch fill the
// same few pages rather than one page (and an overflow page) per session,
// and only the (session_key, turn) index is written per session. That
// index is why a session has an integer key (session_keys) besides its
// id: entries of a few bytes rather than of a 26-character id fill
// several times fewer pages, so a batch of steps of different sessions
// dirties several times fewer of them, and its foreign key is checked
// against an integer primary key. A
// session's status lives in session_status, whose rows are a few dozen
// bytes, and is written only when it changes (a step that ends the
// episode, a close, an expiry), never to the session's row, which carries
// the world spec and system prompt (kilobytes). A session's last activity
// is the later of session_status.updated_at and its last turn's time.
// sessions.status and sessions.updated_at keep the values the session was
// created with.
const schema = `
CREATE TABLE IF NOT EXISTS sessions (
	id         TEXT PRIMARY KEY,
	status     TEXT NOT NULL,
	updated_at INTEGER NOT NULL,
	record     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS session_status (
	id         TEXT PRIMARY KEY REFERENCES sessions(id),
	status     TEXT NOT NULL,
	updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS session_keys (
	key INTEGER PRIMARY KEY,
	id  TEXT NOT NULL UNIQUE REFERENCES sessions(id)
);
CREATE TABLE IF NOT EXISTS turn_log (` + turnLogColumns + `);
`

// turnLogColumns is turn_log's definition, shared by the schema and the
// upgrade that rebuilds a version 1 or 2 turn_log.
const turnLogColumns = `
	seq         INTEGER PRIMARY KEY,
	session_key INTEGER NOT NULL REFERENCES session_keys(key),
	turn        INTEGER NOT NULL,
	record      TEXT NOT NULL,
	at          INTEGER,
	UNIQUE (session_key, turn)
`

// schemaVersion is the user_version of the schema above. Version 0 kept
// the current status in sessions and the turns in a table turns keyed by
// (session_id, turn); version 1 had no turn_log.at and wrote
// session_status at every step; version 2 had no session_keys and keyed
// turn_log by session_id. Open upgrades all three.
const schemaVersion = 3

// upgradeKeys gives every session a key, in the order they were created.
const upgradeKeys = `INSERT INTO session_keys(id) SELECT id FROM sessions WHERE id NOT IN (SELECT id FROM session_keys) ORDER BY rowid`

// upgradeV0 moves a version 0 database's turns to turn_log.
const upgradeV0 = `
INSERT INTO turn_log(session_key, turn, record) SELECT k.key, t.turn, t.record FROM turns t JOIN session_keys k ON k.id = t.session_id ORDER BY t.session_id, t.turn;
DROP TABLE turns;
`

// upgradeV2 rebuilds a version 1 or 2 turn_log (already given its at
// column) keyed by session_key, keeping every turn's seq.
const upgradeV2 = `
CREATE TABLE turn_log_v3 (` + turnLogColumns + `);
INSERT INTO turn_log_v3(seq, session_key, turn, record, at) SELECT t.seq, k.key, t.turn, t.record, t.at FROM turn_log t JOIN session_keys k ON k.id = t.session_id ORDER BY t.seq;
DROP TABLE turn_log;
ALTER TABLE turn_log_v3 RENAME TO turn_log;
`

// migrate brings the database to schemaVersion; one made by a newer
// version is refused.
func migrate(db *sql.DB) error {
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	switch {
	case v == schemaVersion:
		return nil
	case v > schemaVersion:
		return fmt.Errorf("schema version %d is newer than this agentworld's (%d)", v, schemaVersion)
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if v == 1 { // its turn_log, made before turn_log.at, was kept by CREATE TABLE IF NOT EXISTS
		if _, err := tx.Exec(`ALTER TABLE turn_log ADD COLUMN at INTEGER`); err != nil {
			return fmt.Errorf("upgrade from schema version 1: %w", err)
		}
	}
	if _, err := tx.Exec(upgradeKeys); err != nil {
		return fmt.Errorf("upgrade from schema version %d: session keys: %w", v, err)
	}
	var old int
	if err := tx.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'turns'`).Scan(&old); err != nil {
		return err
	}
	if old > 0 {
		if _, err := tx.Exec(upgradeV0); err != nil {
			return fmt.Errorf("upgrade from schema version 0: %w", err)
		}
	}
	// A version 1 or 2 turn_log, kept by CREATE TABLE IF NOT EXISTS, still
	// names its sessions by id.
	var byID int
	if err := tx.QueryRow(`SELECT count(*) FROM pragma_table_info('turn_log') WHERE name = 'session_id'`).Scan(&byID); err != nil {
		return err
	}
	if byID > 0 {
		if _, err := tx.Exec(upgradeV2); err != nil {
			return fmt.Errorf("upgrade from schema version %d: turn_log: %w", v, err)
		}
	}
	if _, err := tx.Exec(`INSERT OR IGNORE INTO session_status(id, status, updated_at) SELECT id, status, updated_at FROM sessions`); err != nil {
		return fmt.Errorf("upgrade from schema version %d: %w", v, err)
	}
	if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)); err != nil {
		return err
	}
	return tx.Commit()
}

// LockSuffix names the lock file beside a database: path + LockSuffix.
const LockSuffix = ".lock"

// Open opens (creating if needed) the database at path, as its only owner:
// it holds an exclusive lock on path+LockSuffix until Close (or until the
// process exits, however it exits), and fails with an error wrapping
// filelock.ErrHeld when another DB, in this process or another, has it
// open. Two processes sharing one database would each cache sessions the
// other changes underneath them.
func Open(path string) (*DB, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("store %s: %w", path, err)
		}
	}
	lock, err := filelock.Acquire(path+LockSuffix, "session database "+path)
	if err != nil {
		return nil, err
	}
	// synchronous(FULL): in WAL mode NORMAL syncs the log only at
	// checkpoints, so a power cut can lose commits already acknowledged;
	// FULL syncs it at every commit, which group commit shares among all
	// the steps of a batch.
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=cache_size(-65536)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		lock.Release()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	fail := func(err error) (*DB, error) {
		_ = db.Close()
		lock.Release()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if _, err := db.Exec(schema + ledgerSchema); err != nil {
		return fail(fmt.Errorf("create schema: %w", err))
	}
	if err := migrate(db); err != nil {
		return fail(err)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		return fail(fmt.Errorf("journal mode is %q, want wal (%v)", mode, err))
	}
	d := &DB{path: path, lock: lock, db: db, writes: make(chan *write, maxBatch), done: make(chan struct{}), version: schemaVersion, keys: map[string]int64{}}
	if err := d.prepare(); err != nil {
		d.closeWriterConn()
		return fail(err)
	}
	go d.writer()
	return d, nil
}

// prepare takes the writer's connection and compiles on it the statements
// every batch runs, once rather than in each transaction.
func (d *DB) prepare() error {
	c, err := d.db.Conn(context.Background())
	if err != nil {
		return err
	}
	d.wconn = c
	for _, p := range []struct {
		s   **sql.Stmt
		sql string
	}{
		// IMMEDIATE, as _txlock in the DSN makes the pool's transactions:
		// the write lock is taken at the start, not upgraded to midway.
		{&d.begin, `BEGIN IMMEDIATE`},
		{&d.commitTx, `COMMIT`},
		{&d.rollback, `ROLLBACK`},
		{&d.savepoint, `SAVEPOINT w`},
		{&d.rollbackTo, `ROLLBACK TO w`},
		{&d.release, `RELEASE w`},
		{&d.setStatus, `UPDATE session_status SET status = ?, updated_at = ? WHERE id = ?`},
		{&d.insertTurn, `INSERT INTO turn_log(session_key, turn, record, at) VALUES(?,?,?,?)`},
		{&d.insertKey, `INSERT INTO session_keys(id) VALUES(?)`},
		{&d.lookupKey, `SELECT key FROM session_keys WHERE id = ?`},
	} {
		st, err := c.PrepareContext(context.Background(), p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.s = st
	}
	for i, n := range turnChunks {
		q := `INSERT INTO turn_log(session_key, turn, record, at) VALUES(?,?,?,?)` + strings.Repeat(`,(?,?,?,?)`, n-1)
		st, err := c.PrepareContext(context.Background(), q)
		if err != nil {
			return fmt.Errorf("prepare the insert of %d turns: %w", n, err)
		}
		d.insertTurns[i] = st
	}
	return nil
}

// closeWriterConn closes the writer's statements and returns its
// connection to the pool.
func (d *DB) closeWriterConn() {
	for _, st := range append([]*sql.Stmt{d.begin, d.commitTx, d.rollback, d.savepoint, d.rollbackTo, d.release, d.setStatus, d.insertTurn, d.insertKey, d.lookupKey}, d.insertTurns[:]...) {
		if st != nil {
			_ = st.Close()
		}
	}
	if d.wconn != nil {
		_ = d.wconn.Close()
	}
}

// ErrReadOnly is returned by writes to a DB from OpenReadOnly.
var ErrReadOnly = errors.New("store opened read-only")

// OpenReadOnly opens an existing database for reading only, without taking
// the owner's lock, so a command that only reads (agentworld world check)
// works beside the serve that owns the file: SQLite's WAL mode lets readers
// in other processes see every committed transaction. Writes fail with
// ErrReadOnly.
func OpenReadOnly(path string) (*DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if err := db.Ping(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if v > schemaVersion {
		_ = db.Close()
		return nil, fmt.Errorf("store %s: schema version %d is newer than this agentworld's (%d)", path, v, schemaVersion)
	}
	done := make(chan struct{})
	close(done)
	return &DB{path: path, db: db, readOnly: true, done: done, version: v}, nil
}

// writer commits queued writes in batches, each write inside its own
// savepoint so one failure does not undo the others.
func (d *DB) writer() {
	defer close(d.done)
	ctx := context.Background()
	for w := range d.writes {
		batch := []*write{w}
		// Let the goroutines that are runnable now (steps on their way to
		// the store) run first, while each round of them queues more
		// writes: on a busy server a batch then carries the steps of a
		// whole scheduling round rather than the few that finished while
		// the last commit ran, and each commit (and fsync) serves more of
		// them. On an idle one nothing is runnable and the yield returns
		// at once.
		for range maxYields {
			n := len(d.writes)
			runtime.Gosched()
			if len(d.writes) == n || len(d.writes) >= maxBatch-1 {
				break
			}
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case w, ok := <-d.writes:
				if !ok {
					break fill
				}
				batch = append(batch, w)
			default:
				break fill
			}
		}
		if d.beforeCommit != nil {
			d.beforeCommit(len(batch))
		}
		d.commit(ctx, batch)
	}
}

// commit runs a batch in one transaction. It first runs the writes one
// after another as they are; only when one fails is the transaction rolled
// back and the batch run again with each write in its own savepoint, so
// the failure undoes that write alone. (A savepoint per write in every
// batch would cost two more statements per step for a case that almost
// never happens: a duplicate turn, a session gone.)
func (d *DB) commit(ctx context.Context, batch []*write) {
	errs, err := d.run(ctx, batch, false)
	if errors.Is(err, errIsolate) {
		errs, err = d.run(ctx, batch, true)
	}
	if err != nil {
		for _, w := range batch {
			w.err <- err
		}
		return
	}
	d.commits.Add(1)
	d.committed.Add(int64(len(batch)))
	for i, w := range batch {
		w.err <- errs[i]
	}
}

// errIsolate says a write of a batch run without savepoints failed: the
// transaction was rolled back and the batch is to run with them.
var errIsolate = errors.New("a write failed: run the batch with a savepoint per write")

// run runs batch in a transaction and commits it; errs are the writes' own
// errors (only with isolate; without, a failure ends the run with
// errIsolate), err a failure of the transaction.
func (d *DB) run(ctx context.Context, batch []*write, isolate bool) (errs []error, err error) {
	if _, err := d.begin.ExecContext(ctx); err != nil {
		return nil, fmt.Errorf("store: begin: %w", err)
	}
	tx := &batchTx{Conn: d.wconn}
	errs = make([]error, len(batch))
	for i := 0; i < len(batch); i++ {
		w := batch[i]
		if !isolate {
			if w.fn == nil { // a run of turns, inserted together
				j := i + 1
				for j < len(batch) && batch[j].fn == nil {
					j++
				}
				if err := d.insertTurnRun(ctx, tx, batch[i:j]); err != nil {
					d.abort(ctx)
					return nil, errIsolate
				}
				i = j - 1
				continue
			}
			if errs[i] = w.fn(ctx, tx); errs[i] != nil {
				d.abort(ctx)
				return nil, errIsolate
			}
			continue
		}
		if _, err := d.savepoint.ExecContext(ctx); err != nil {
			errs[i] = err
			continue
		}
		if errs[i] = d.runOne(ctx, tx, w); errs[i] != nil {
			_, _ = d.rollbackTo.ExecContext(ctx)
		}
		_, _ = d.release.ExecContext(ctx)
	}
	if _, err := d.commitTx.ExecContext(ctx); err != nil {
		// A COMMIT that fails (the disk full, the file busy) can leave the
		// transaction open; the next batch must start afresh.
		d.abort(ctx)
		return nil, fmt.Errorf("store: commit: %w", err)
	}
	return errs, nil
}

// runOne runs one write of a batch by itself.
func (d *DB) runOne(ctx context.Context, tx *batchTx, w *write) error {
	if w.fn != nil {
		return w.fn(ctx, tx)
	}
	t := &w.turn
	if err := d.resolveKey(ctx, t); err != nil {
		return err
	}
	if _, err := d.insertTurn.ExecContext(ctx, t.key, t.turn, t.rec, t.now.UnixMilli()); err != nil {
		if isForeignKey(err) {
			return fmt.Errorf("session %s: %w", t.id, sim.ErrNotFound)
		}
		return fmt.Errorf("store session %s turn %d: %w", t.id, t.turn, err)
	}
	return d.finishTurn(ctx, tx, t)
}

// insertTurnRun inserts a run of turn writes with as few statements as
// turnChunks allow, then sets the statuses that change. Its error is the
// first failure; the writer then runs the batch again a write at a time
// (runOne), which tells whose write failed.
func (d *DB) insertTurnRun(ctx context.Context, tx *batchTx, ws []*write) error {
	for _, w := range ws {
		if err := d.resolveKey(ctx, &w.turn); err != nil {
			return err
		}
	}
	for rest := ws; len(rest) > 0; {
		c := 0
		for turnChunks[c] > len(rest) {
			c++
		}
		n := turnChunks[c]
		args := d.args[:0]
		for _, w := range rest[:n] {
			args = append(args, w.turn.key, w.turn.turn, w.turn.rec, w.turn.now.UnixMilli())
		}
		_, err := d.insertTurns[c].ExecContext(ctx, args...)
		clear(args) // the records are the callers'; let them go
		d.args = args[:0]
		if err != nil {
			return err
		}
		rest = rest[n:]
	}
	for _, w := range ws {
		if err := d.finishTurn(ctx, tx, &w.turn); err != nil {
			return err
		}
	}
	return nil
}

// resolveKey sets t's session key, looking it up if the cache had none.
func (d *DB) resolveKey(ctx context.Context, t *turnWrite) error {
	if t.haveKey {
		return nil
	}
	k, err := d.sessionKey(ctx, t.id)
	if err != nil {
		return err
	}
	t.key, t.haveKey = k, true
	return nil
}

// finishTurn records the session's status after t, when it changed: a
// step that leaves the session active (as it was, or it could not step)
// changes nothing else; its time is the turn's.
func (d *DB) finishTurn(ctx context.Context, tx *batchTx, t *turnWrite) error {
	if t.status == sim.StatusActive {
		return nil
	}
	return d.setStatusIn(ctx, tx, t.id, t.status, t.now)
}

// abort rolls back the writer's transaction, if one is open (when none is,
// ROLLBACK fails, harmlessly).
func (d *DB) abort(ctx context.Context) { _, _ = d.rollback.ExecContext(ctx) }

// batchTx is what a write runs its statements on: the writer's
// connection, inside the batch's transaction. The writer's prepared
// statements (DB.insertTurn, DB.setStatus) run there directly.
type batchTx struct {
	*sql.Conn
}

// ErrClosed is returned by calls after Close.
var ErrClosed = errors.New("store closed")

func (d *DB) do(ctx context.Context, fn func(ctx context.Context, tx *batchTx) error) error {
	return d.enqueue(ctx, &write{fn: fn, err: make(chan error, 1)})
}

// enqueue queues w and waits for its outcome.
func (d *DB) enqueue(ctx context.Context, w *write) error {
	if d.readOnly {
		return fmt.Errorf("store %s: %w", d.path, ErrReadOnly)
	}
	d.mu.RLock()
	if d.closed {
		d.mu.RUnlock()
		return ErrClosed
	}
	select {
	case d.writes <- w:
	case <-ctx.Done():
		d.mu.RUnlock()
		return ctx.Err()
	}
	d.mu.RUnlock()
	// Once queued the write happens; wait for it regardless of ctx so the
	// caller never reports failure for a committed step.
	return <-w.err
}

// recordBufs holds the buffers turn records are encoded in.
var recordBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// IntegrityCheck runs SQLite's integrity check; a crash must never make it
// fail.
func (d *DB) IntegrityCheck(ctx context.Context) error {
	var res string
	if err := d.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil {
		return fmt.Errorf("store %s: integrity check: %w", d.path, err)
	}
	if res != "ok" {
		return fmt.Errorf("store %s: integrity check: %s", d.path, res)
	}
	return nil
}

// Close flushes pending writes and closes the database.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	if d.readOnly {
		d.mu.Unlock()
		return d.db.Close()
	}
	close(d.writes)
	d.mu.Unlock()
	<-d.done
	defer d.lock.Release() // after the database is closed: the next owner finds it whole
	d.closeWriterConn()
	if _, err := d.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		_ = d.db.Close()
		return fmt.Errorf("store %s: checkpoint: %w", d.path, err)
	}
	return d.db.Close()
}
