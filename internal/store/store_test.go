package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/filelock"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit"
)

func TestRoundTripAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db", "s.db")
	ctx := context.Background()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	rec := sim.SessionRecord{ID: "s1", Root: "s1", World: "w", Domain: "terminal", Backend: "model", Spec: []byte(`{"name":"w"}`),
		SystemPrompt: "sys", InitialObservation: "$ ", Status: sim.StatusActive, CreatedAt: now, UpdatedAt: now, Labels: map[string]string{"a": "b"}}
	if err := db.CreateSession(ctx, rec, nil); err != nil {
		t.Fatal(err)
	}
	var turns []sim.TurnRecord
	for i := 1; i <= 3; i++ {
		tr := sim.TurnRecord{Turn: i, HistoryTurn: sim.HistoryTurn{Action: fmt.Sprint("a", i), Observation: fmt.Sprint("o", i), Message: "m", Assistant: "x"},
			Result: sim.StepResult{Observation: fmt.Sprint("o", i), Info: sim.StepInfo{Turn: i, Backend: "model"}}}
		st := sim.StatusActive
		if i == 3 {
			st = sim.StatusTerminated
		}
		if err := db.AppendTurn(ctx, "s1", tr, st); err != nil {
			t.Fatal(err)
		}
		turns = append(turns, tr)
	}
	if err := db.AppendTurn(ctx, "s1", turns[0], sim.StatusActive); err == nil {
		t.Fatal("duplicate turn accepted")
	}
	if err := db.AppendTurn(ctx, "nope", turns[0], sim.StatusActive); !errors.Is(err, sim.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	db = reopen(t, db, path)
	got, gotTurns, err := db.LoadSession(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != sim.StatusTerminated || got.SystemPrompt != "sys" || got.Labels["a"] != "b" {
		t.Fatalf("session after reopen: %+v", got)
	}
	if diff := cmp.Diff(turns, gotTurns); diff != "" {
		t.Fatalf("turns after reopen (-want +got):\n%s", diff)
	}
	if _, _, err := db.LoadSession(ctx, "missing"); !errors.Is(err, sim.ErrNotFound) {
		t.Fatalf("missing session: %v", err)
	}
}

// TestConcurrentAppendsGroupCommit writes from many goroutines at once;
// every acknowledged turn is there, in order.
// Concurrent writers share transactions: while the first one is held
// before its commit, every session's create queues behind it and the next
// transaction carries all of them; every write is still acknowledged and
// readable.
func TestConcurrentAppendsGroupCommit(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	const sessions, turns = 32, 10
	largest, firstBatch := holdFirstBatch(db, sessions)
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := 0; s < sessions; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			id := fmt.Sprint("s", s)
			if err := db.CreateSession(ctx, sim.SessionRecord{ID: id, Status: sim.StatusActive, Spec: []byte(`{}`)}, nil); err != nil {
				errs <- err
				return
			}
			for i := 1; i <= turns; i++ {
				if err := db.AppendTurn(ctx, id, sim.TurnRecord{Turn: i, HistoryTurn: sim.HistoryTurn{Action: fmt.Sprint(i)}}, sim.StatusActive); err != nil {
					errs <- err
					return
				}
			}
		}(s)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for s := 0; s < sessions; s++ {
		_, ts, err := db.LoadSession(ctx, fmt.Sprint("s", s))
		if err != nil || len(ts) != turns {
			t.Fatalf("session %d: %d turns, %v", s, len(ts), err)
		}
	}
	if n, want := largest.Load(), sessions-firstBatch.Load(); n < want {
		t.Errorf("largest transaction carried %d writes, want the %d queued behind the first", n, want)
	}
	if c, w := db.commits.Load(), db.committed.Load(); w != sessions*(turns+1) || c >= w {
		t.Errorf("%d transactions for %d writes, want all %d writes in fewer transactions", c, w, sessions*(turns+1))
	}
}

// openTemp opens a new database in the test's temporary directory, closed
// when the test ends.
func openTemp(t *testing.T) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// reopen closes db and opens path again, closed when the test ends.
func reopen(t *testing.T, db *DB, path string) *DB {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// holdFirstBatch holds db's first batch before its commit until it and the
// writes queued behind it number total, so that those share the next
// transaction (bounded, so a bug fails the test instead of hanging it); it
// returns the size of the largest batch and of the first one. The writer
// may have drained several writes into the first batch already.
func holdFirstBatch(db *DB, total int) (largest, firstBatch *atomic.Int64) {
	largest, firstBatch = new(atomic.Int64), new(atomic.Int64)
	first := true
	db.beforeCommit = func(n int) { // runs on the writer goroutine only
		if first {
			first = false
			firstBatch.Store(int64(n))
			for deadline := time.Now().Add(time.Minute); n+len(db.writes) < total && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		}
		largest.Store(max(largest.Load(), int64(n)))
	}
	return largest, firstBatch
}

// BenchmarkGroupCommit appends turns to 256 sessions, as serve's store
// sees them under load, with records the size of a terminal world's (a
// spec and rendered system prompt of a few KiB per session, a turn of a
// command, its screen and the step's info), and reports the writes each
// transaction (and so each fsync of the log) carried, the wall time per
// write and the process CPU per write (the store's own: the goroutines
// around it only wait). With 256 writers (one per session) batches are
// large; with 8 (each stepping 32 sessions in turn) they are small, as in
// a server whose sessions spend most of a step elsewhere, and the cost of
// each commit shows.
func BenchmarkGroupCommit(b *testing.B) {
	for _, writers := range []int{256, 32, 8} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) { benchGroupCommit(b, 256, writers) })
	}
}

func benchGroupCommit(b *testing.B, sessions, writers int) {
	db, err := Open(filepath.Join(b.TempDir(), "s.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	spec := []byte(`{"name":"python-terminal","description":"` + strings.Repeat("a shell in a project ", 60) + `"}`)
	for s := range sessions {
		rec := sim.SessionRecord{ID: benchID(s), Status: sim.StatusActive, Spec: spec, SystemPrompt: strings.Repeat("You simulate a terminal. ", 120)}
		if err := db.CreateSession(ctx, rec, nil); err != nil {
			b.Fatal(err)
		}
	}
	screen := "root@7f3c9e2a1b4d:/app# ls -la\n" + strings.Repeat("-rw-r--r-- 1 root root  120 Jan  1 00:00 file.py\n", 8)
	c0, w0 := db.commits.Load(), db.committed.Load()
	var left atomic.Int64
	left.Store(int64(b.N))
	cpu0 := testkit.CPUTime()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			turns := map[int]int{}
			for k := 0; left.Add(-1) >= 0; k++ {
				s := w + writers*(k%(sessions/writers))
				turns[s]++
				i := turns[s]
				tr := sim.TurnRecord{Turn: i, HistoryTurn: sim.HistoryTurn{Action: `[{"keystrokes":"ls -la\n","duration":0.5}]`, Observation: screen,
					Message: "Action " + fmt.Sprint(i) + ": ls -la", Assistant: "<predicted_observation>" + screen + "</predicted_observation>"},
					Result: sim.StepResult{Observation: screen, Info: sim.StepInfo{Turn: i, Backend: "model", Model: "wm", PromptTokens: 1200, CompletionTokens: 80, FinishReason: "stop", LatencyMS: 3}}}
				if err := db.AppendTurn(ctx, benchID(s), tr, sim.StatusActive); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	el, cpu := time.Since(start), testkit.CPUTime()-cpu0
	c, w := db.commits.Load()-c0, db.committed.Load()-w0
	b.ReportMetric(float64(w)/float64(max(c, 1)), "writes/commit")
	b.ReportMetric(float64(el.Microseconds())/float64(max(w, 1)), "us/write")
	b.ReportMetric(float64(cpu.Microseconds())/float64(max(w, 1)), "cpu_us/write")
}

// A second Open of a database already open (here in this process; the
// filelock package tests another process and kill -9) is refused with an
// error naming the database, and succeeds once the first is closed.
func TestSecondOpenIsRefusedUntilClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(path)
	if !errors.Is(err, filelock.ErrHeld) || !strings.Contains(err.Error(), "session database "+path+" is in use") {
		t.Fatalf("second Open: %v, want filelock.ErrHeld naming %s", err, path)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	db.Close()
}

// A read-only open works beside the owner (world check beside serve),
// sees its committed writes, and refuses to write.
func TestReadOnlyOpenBesideTheOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	ctx := context.Background()
	owner, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	now := time.Now().UTC()
	rec := sim.SessionRecord{ID: "s1", Root: "s1", World: "w", Status: sim.StatusActive, CreatedAt: now, UpdatedAt: now}
	if err := owner.CreateSession(ctx, rec, nil); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatalf("read-only open beside the owner: %v", err)
	}
	if got, _, err := ro.LoadSession(ctx, "s1"); err != nil || got.World != "w" {
		t.Errorf("read-only LoadSession: %+v %v", got, err)
	}
	if err := ro.AppendFacts(ctx, "w", []fiction.Fact{{Entity: "e", Attribute: "a", Value: "v"}}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write through a read-only DB: %v, want ErrReadOnly", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	// After the owner is gone too (its WAL checkpointed away).
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err = OpenReadOnly(path)
	if err != nil {
		t.Fatalf("read-only open after the owner closed: %v", err)
	}
	if got, _, err := ro.LoadSession(ctx, "s1"); err != nil || got.World != "w" {
		t.Errorf("read-only LoadSession after the owner closed: %+v %v", got, err)
	}
	ro.Close()
	if _, err := OpenReadOnly(filepath.Join(t.TempDir(), "none.db")); err == nil {
		t.Error("read-only open of a missing database succeeded")
	}
}

// A database written by an earlier schema is upgraded when its owner opens
// it, keeping every session's status and turns; a read-only open before
// that reads the old layout as it is. Version 0 kept the current status in
// the sessions row and turns in a table keyed by session and turn; version
// 1 had turn_log without the turns' times and session_status; version 2
// keyed turn_log by session id, with no session_keys.
func TestUpgradeFromEarlierSchemas(t *testing.T) {
	rec := sim.SessionRecord{ID: "s1", Root: "s1", World: "w", Spec: []byte(`{"name":"w"}`), Status: sim.StatusActive}
	raw, _ := json.Marshal(rec)
	want := []sim.TurnRecord{
		{Turn: 1, HistoryTurn: sim.HistoryTurn{Action: "ls", Observation: "a"}},
		{Turn: 2, HistoryTurn: sim.HistoryTurn{Action: "cd x", Observation: "b"}},
	}
	session := fmt.Sprintf(`INSERT INTO sessions VALUES('s1', 'terminated', 1700000000000, '%s')`, raw)
	for _, tc := range []struct {
		version int
		schema  []string
		turn    string // the INSERT of one turn, %d the turn, %s its record
	}{
		{0, []string{`CREATE TABLE sessions (id TEXT PRIMARY KEY, status TEXT NOT NULL, updated_at INTEGER NOT NULL, record TEXT NOT NULL)`,
			`CREATE TABLE turns (session_id TEXT NOT NULL REFERENCES sessions(id), turn INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (session_id, turn)) WITHOUT ROWID`,
			session}, `INSERT INTO turns VALUES('s1', %d, '%s')`},
		{1, []string{`CREATE TABLE sessions (id TEXT PRIMARY KEY, status TEXT NOT NULL, updated_at INTEGER NOT NULL, record TEXT NOT NULL)`,
			`CREATE TABLE session_status (id TEXT PRIMARY KEY REFERENCES sessions(id), status TEXT NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID`,
			`CREATE TABLE turn_log (seq INTEGER PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions(id), turn INTEGER NOT NULL, record TEXT NOT NULL, UNIQUE (session_id, turn))`,
			`PRAGMA user_version = 1`, session, `INSERT INTO session_status VALUES('s1', 'terminated', 1700000000000)`},
			`INSERT INTO turn_log(session_id, turn, record) VALUES('s1', %d, '%s')`},
		{2, []string{`CREATE TABLE sessions (id TEXT PRIMARY KEY, status TEXT NOT NULL, updated_at INTEGER NOT NULL, record TEXT NOT NULL)`,
			`CREATE TABLE session_status (id TEXT PRIMARY KEY REFERENCES sessions(id), status TEXT NOT NULL, updated_at INTEGER NOT NULL) WITHOUT ROWID`,
			`CREATE TABLE turn_log (seq INTEGER PRIMARY KEY, session_id TEXT NOT NULL REFERENCES sessions(id), turn INTEGER NOT NULL, record TEXT NOT NULL, at INTEGER, UNIQUE (session_id, turn))`,
			`PRAGMA user_version = 2`, session, `INSERT INTO sessions VALUES('s0', 'active', 1600000000000, '{}')`,
			`INSERT INTO session_status VALUES('s1', 'terminated', 1700000000000)`, `INSERT INTO session_status VALUES('s0', 'active', 1600000000000)`},
			`INSERT INTO turn_log(session_id, turn, record, at) VALUES('s1', %d, '%s', 1600000000000)`},
	} {
		t.Run(fmt.Sprintf("version %d", tc.version), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			old, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
			if err != nil {
				t.Fatal(err)
			}
			stmts := tc.schema
			for _, tr := range want {
				b, _ := json.Marshal(tr)
				stmts = append(stmts, fmt.Sprintf(tc.turn, tr.Turn, b))
			}
			for _, s := range stmts {
				if _, err := old.Exec(s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			check := func(what string, db *DB) {
				t.Helper()
				got, turns, err := db.LoadSession(context.Background(), "s1")
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if got.Status != sim.StatusTerminated || !got.UpdatedAt.Equal(time.UnixMilli(1700000000000)) {
					t.Errorf("%s: status %q updated %v, want terminated at the stored time", what, got.Status, got.UpdatedAt)
				}
				if d := cmp.Diff(want, turns); d != "" {
					t.Errorf("%s: turns (-want +got):\n%s", what, d)
				}
			}
			ro, err := OpenReadOnly(path)
			if err != nil {
				t.Fatal(err)
			}
			check("read-only before the upgrade", ro)
			ro.Close()
			db, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			check("upgraded", db)
			db = reopen(t, db, path)
			check("reopened after the upgrade", db)
			ctx := context.Background()
			if err := db.AppendTurn(ctx, "s1", sim.TurnRecord{Turn: 2}, sim.StatusActive); err == nil {
				t.Error("a turn already recorded before the upgrade was recorded again")
			}
			// A turn after the upgrade has a time, which is the session's
			// last activity from then on.
			before := time.Now().Add(-time.Second)
			if err := db.AppendTurn(ctx, "s1", sim.TurnRecord{Turn: 3}, sim.StatusActive); err != nil {
				t.Fatal(err)
			}
			if got, turns, err := db.LoadSession(ctx, "s1"); err != nil || len(turns) != 3 || got.UpdatedAt.Before(before) {
				t.Errorf("after a turn recorded after the upgrade: %d turns, updated %v, %v", len(turns), got.UpdatedAt, err)
			}
		})
	}
}

// A database from a newer agentworld (a schema version this one does not
// know) is refused rather than misread.
func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string) (*DB, error){"Open": Open, "OpenReadOnly": OpenReadOnly} {
		if d, err := open(path); err == nil || !strings.Contains(err.Error(), "newer") {
			if d != nil {
				d.Close()
			}
			t.Errorf("%s of a newer schema: %v, want a refusal naming it", name, err)
		}
	}
}

// A batch of turns is inserted in chunks of turnChunks' sizes (70 turns:
// 64, 4, 1 and 1); statuses that change are set, a turn of a session
// that does not exist fails alone with sim.ErrNotFound, and sessions whose
// keys the cache lacks (opened before a restart) are looked up.
func TestBatchOfTurnsInChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const sessions = 69
	for s := range sessions {
		if err := db.CreateSession(ctx, sim.SessionRecord{ID: benchID(s), Status: sim.StatusActive, Spec: []byte(`{}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	db = reopen(t, db, path) // an empty key cache
	const writes = sessions + 1
	largest, _ := holdFirstBatch(db, writes)
	var wg sync.WaitGroup
	errs := make([]error, writes)
	status := func(s int) string {
		if s%7 == 3 {
			return sim.StatusTerminated
		}
		return sim.StatusActive
	}
	for s := range sessions {
		wg.Go(func() {
			errs[s] = db.AppendTurn(ctx, benchID(s), sim.TurnRecord{Turn: 1, HistoryTurn: sim.HistoryTurn{Action: fmt.Sprint("echo ", s)}}, status(s))
		})
	}
	wg.Go(func() { errs[sessions] = db.AppendTurn(ctx, "nope", sim.TurnRecord{Turn: 1}, sim.StatusActive) })
	wg.Wait()
	if n := largest.Load(); n < writes/2 {
		t.Fatalf("largest batch %d, want most of the %d writes", n, writes)
	}
	for s := range sessions {
		if errs[s] != nil {
			t.Errorf("session %d: %v", s, errs[s])
		}
	}
	if !errors.Is(errs[sessions], sim.ErrNotFound) {
		t.Errorf("turn of an unknown session: %v, want ErrNotFound", errs[sessions])
	}
	for s := range sessions {
		rec, turns, err := db.LoadSession(ctx, benchID(s))
		if err != nil || len(turns) != 1 || turns[0].Action != fmt.Sprint("echo ", s) || rec.Status != status(s) {
			t.Errorf("session %d: status %q, turns %+v, %v; want its one turn and status %q", s, rec.Status, turns, err, status(s))
		}
	}
	// Every session's key is cached now: a second turn each needs no lookup.
	for s := range sessions {
		if _, ok := db.keyOf(benchID(s)); !ok {
			t.Fatalf("session %d: key not cached after its turn", s)
		}
	}
}

// One failing write in a batch (a turn recorded twice, a session that does
// not exist) fails alone: the batch is run again with a savepoint per
// write, and every other write of it is committed.
func TestFailingWriteInBatchFailsAlone(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	const sessions = 8
	for s := range sessions {
		if err := db.CreateSession(ctx, sim.SessionRecord{ID: fmt.Sprint("s", s), Status: sim.StatusActive, Spec: []byte(`{}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	const writes = sessions + 1
	largest, firstBatch := holdFirstBatch(db, writes)
	turn1 := sim.TurnRecord{Turn: 1, HistoryTurn: sim.HistoryTurn{Action: "ls"}}
	var wg sync.WaitGroup
	errs := make([]error, writes)
	for s := range sessions {
		wg.Go(func() { errs[s] = db.AppendTurn(ctx, fmt.Sprint("s", s), turn1, sim.StatusActive) })
	}
	wg.Go(func() { errs[sessions] = db.AppendTurn(ctx, "s1", turn1, sim.StatusActive) }) // s1's turn 1 twice
	wg.Wait()
	var failed []int
	for i, err := range errs {
		if err != nil {
			failed = append(failed, i)
		}
	}
	if n, want := largest.Load(), max(writes-firstBatch.Load(), 2); n < want {
		t.Fatalf("largest batch %d, want at least %d (the writes queued behind the first)", n, want)
	}
	if len(failed) != 1 || (failed[0] != 1 && failed[0] != sessions) {
		t.Fatalf("failed writes %v (%v), want exactly one of s1's two turn 1", failed, errs)
	}
	for s := range sessions {
		if _, turns, err := db.LoadSession(ctx, fmt.Sprint("s", s)); err != nil || len(turns) != 1 {
			t.Errorf("session s%d: %d turns, %v; want 1", s, len(turns), err)
		}
	}
	if err := db.AppendTurn(ctx, "nope", turn1, sim.StatusActive); !errors.Is(err, sim.ErrNotFound) {
		t.Errorf("unknown session: %v, want ErrNotFound", err)
	}
}

// A batch whose COMMIT fails (here a deferred foreign key that COMMIT finds
// broken, which leaves SQLite's transaction open) fails its writes and
// leaves nothing behind: the writer rolls it back, so the next batch
// begins a transaction of its own and its writes land.
func TestFailedCommitIsRolledBack(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	err := db.do(ctx, func(ctx context.Context, tx *batchTx) error {
		if _, err := tx.ExecContext(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
			return err
		}
		_, err := db.insertTurn.ExecContext(ctx, 1<<40, 1, `{}`, nil) // no session has this key
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("write breaking a deferred foreign key: %v, want its COMMIT to fail", err)
	}
	if err := db.CreateSession(ctx, sim.SessionRecord{ID: "s", Status: sim.StatusActive, Spec: []byte(`{}`)}, nil); err != nil {
		t.Fatalf("the write after a failed commit: %v", err)
	}
	if err := db.AppendTurn(ctx, "s", sim.TurnRecord{Turn: 1, HistoryTurn: sim.HistoryTurn{Action: "ls"}}, sim.StatusActive); err != nil {
		t.Fatal(err)
	}
	var orphans int
	if err := db.db.QueryRowContext(ctx, `SELECT count(*) FROM turn_log WHERE session_key = 1 << 40`).Scan(&orphans); err != nil || orphans != 0 {
		t.Errorf("turns of the failed commit left: %d (%v), want 0", orphans, err)
	}
	if _, turns, err := db.LoadSession(ctx, "s"); err != nil || len(turns) != 1 {
		t.Errorf("session s: %d turns, %v; want 1", len(turns), err)
	}
}

// A step that leaves a session active writes only its turn; the session's
// last activity is still that turn's time, and its status stays active
// until a step or a call changes it.
func TestActiveStepUpdatesLastActivity(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	created := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	if err := db.CreateSession(ctx, sim.SessionRecord{ID: "s1", Status: sim.StatusActive, Spec: []byte(`{}`), CreatedAt: created, UpdatedAt: created}, nil); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	if err := db.AppendTurn(ctx, "s1", sim.TurnRecord{Turn: 1}, sim.StatusActive); err != nil {
		t.Fatal(err)
	}
	got, _, err := db.LoadSession(ctx, "s1")
	if err != nil || got.Status != sim.StatusActive || got.UpdatedAt.Before(before) {
		t.Fatalf("after an active step: status %q updated %v (%v), want active and the step's time", got.Status, got.UpdatedAt, err)
	}
	if err := db.SetStatus(ctx, "s1", sim.StatusClosed); err != nil {
		t.Fatal(err)
	}
	if got, _, err := db.LoadSession(ctx, "s1"); err != nil || got.Status != sim.StatusClosed {
		t.Fatalf("after close: status %q (%v)", got.Status, err)
	}
}

// TestEncodeRecord: a turn record is stored as the very text json.Marshal
// gives (HTML characters escaped, no newline), whatever buffer it was
// encoded in before.
func TestEncodeRecord(t *testing.T) {
	for _, tr := range []sim.TurnRecord{
		{Turn: 1, HistoryTurn: sim.HistoryTurn{Action: `[{"keystrokes":"ls\n"}]`, Observation: "a <b> & c\u2028"}, Result: sim.StepResult{Observation: "a <b>", Reward: 0.5}},
		{Turn: 2, Result: sim.StepResult{Observation: strings.Repeat("long ", 2000), Info: sim.StepInfo{Backend: "model", RewardComponents: map[string]float64{"b": 1, "a": 0}}}},
		{Turn: 3},
	} {
		want, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeRecord(tr)
		if err != nil || got != string(want) {
			t.Errorf("turn %d: encodeRecord = %q, %v; json.Marshal gives %q", tr.Turn, got, err, want)
		}
	}
}

// benchID is session s's id in serve's form: "s_" and 24 hex digits.
func benchID(s int) string { return fmt.Sprintf("s_%024x", uint64(s)*0x9e3779b97f4a7c15) }
