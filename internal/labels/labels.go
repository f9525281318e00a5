// Package labels keeps people's judgements of benchmark samples (the five
// rubric dimensions, or a Turing pick between the prediction and the real
// observation) in an embedded SQLite database, so they can be compared
// with the judges' (see package agree).
package labels

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/agentworld/agentworld/internal/agree"
	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/score"
)

// Label is one person's judgement of one prediction: a run's sample.
type Label struct {
	ID int64 `json:"id"`
	// Run names the run directory the sample was shown from; Sample is its
	// sample key and Model the model that predicted it.
	Run     string `json:"run"`
	Sample  string `json:"sample"`
	Model   string `json:"model"`
	Labeler string `json:"labeler,omitempty"`
	// Scores are the five dimensions 1..5; all zero for a Turing pick.
	Scores score.Scores `json:"scores"`
	// TuringPick is agree.PickTruth or agree.PickPrediction for a Turing
	// pick, "" for a dimension label.
	TuringPick string    `json:"turing_pick,omitempty"`
	At         time.Time `json:"at"`
}

// Validate checks a label before it is stored: a run, sample and model,
// and either all five dimensions in 1..5 or a Turing pick.
func (l Label) Validate() error {
	switch {
	case l.Run == "":
		return fielderr.New(ErrInvalid, "run", "%s", "is empty")
	case l.Sample == "":
		return fielderr.New(ErrInvalid, "sample", "%s", "is empty")
	case l.Model == "":
		return fielderr.New(ErrInvalid, "model", "%s", "is empty")
	}
	if l.TuringPick != "" {
		if l.TuringPick != agree.PickTruth && l.TuringPick != agree.PickPrediction {
			return fielderr.New(ErrInvalid, "turing_pick", "%s", fmt.Sprintf("%q is neither %q nor %q", l.TuringPick, agree.PickTruth, agree.PickPrediction))
		}
		if l.Scores != (score.Scores{}) {
			return fielderr.New(ErrInvalid, "scores", "%s", "a Turing pick carries no scores")
		}
		return nil
	}
	for i, v := range l.Scores.Values() {
		if v < 1 || v > 5 {
			return fielderr.New(ErrInvalid, "scores."+score.Dimensions[i], "%s", fmt.Sprintf("%d is not in 1..5", v))
		}
	}
	return nil
}

// Agree converts l for package agree.
func (l Label) Agree() agree.Label {
	return agree.Label{Model: l.Model, Key: l.Sample, Labeler: l.Labeler, Scores: l.Scores, TuringPick: l.TuringPick}
}

const schema = `
CREATE TABLE IF NOT EXISTS labels (
	id          INTEGER PRIMARY KEY,
	run         TEXT NOT NULL,
	sample      TEXT NOT NULL,
	model       TEXT NOT NULL,
	labeler     TEXT NOT NULL,
	format      INTEGER NOT NULL,
	factuality  INTEGER NOT NULL,
	consistency INTEGER NOT NULL,
	realism     INTEGER NOT NULL,
	quality     INTEGER NOT NULL,
	turing_pick TEXT NOT NULL,
	at          INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS labels_run ON labels(run, sample);
`

// DB is a label database.
type DB struct {
	path string
	db   *sql.DB
}

// Open opens (creating if needed) the label database at path.
func Open(path string) (*DB, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("labels %s: %w", path, err)
		}
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("labels %s: %w", path, err)
	}
	if _, err := db.Exec(schema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("labels %s: create schema: %w", path, err)
	}
	return &DB{path: path, db: db}, nil
}

// ErrInvalid is the kind of a label refused by [Label.Validate] and
// [DB.Add] (a [fielderr.Error] naming the field).
var ErrInvalid = errors.New("invalid label")

// Add stores a valid label, setting its ID and, when zero, its time.
func (d *DB) Add(ctx context.Context, l *Label) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if l.At.IsZero() {
		l.At = time.Now().UTC()
	}
	s := l.Scores
	res, err := d.db.ExecContext(ctx, `INSERT INTO labels(run, sample, model, labeler, format, factuality, consistency, realism, quality, turing_pick, at) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		l.Run, l.Sample, l.Model, l.Labeler, s.Format, s.Factuality, s.Consistency, s.Realism, s.Quality, l.TuringPick, l.At.UnixMilli())
	if err != nil {
		return fmt.Errorf("labels %s: %w", d.path, err)
	}
	l.ID, err = res.LastInsertId()
	return err
}

// List returns the labels of run ("" for every run), oldest first.
func (d *DB) List(ctx context.Context, run string) ([]Label, error) {
	q := `SELECT id, run, sample, model, labeler, format, factuality, consistency, realism, quality, turing_pick, at FROM labels`
	var args []any
	if run != "" {
		q += ` WHERE run = ?`
		args = append(args, run)
	}
	rows, err := d.db.QueryContext(ctx, q+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("labels %s: %w", d.path, err)
	}
	defer rows.Close()
	var out []Label
	for rows.Next() {
		var l Label
		var at int64
		s := &l.Scores
		if err := rows.Scan(&l.ID, &l.Run, &l.Sample, &l.Model, &l.Labeler, &s.Format, &s.Factuality, &s.Consistency, &s.Realism, &s.Quality, &l.TuringPick, &at); err != nil {
			return nil, err
		}
		l.At = time.UnixMilli(at).UTC()
		out = append(out, l)
	}
	return out, rows.Err()
}

// Count returns the number of labels stored.
func (d *DB) Count(ctx context.Context) (int, error) {
	var n int
	err := d.db.QueryRowContext(ctx, `SELECT count(*) FROM labels`).Scan(&n)
	return n, err
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// ReadAgree opens the label database at path and returns every label for
// package agree; the file must exist.
func ReadAgree(ctx context.Context, path string) ([]agree.Label, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	d, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ls, err := d.List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]agree.Label, len(ls))
	for i, l := range ls {
		out[i] = l.Agree()
	}
	return out, nil
}
