package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentworld/agentworld/internal/fiction"
)

// ledgerSchema holds fictional worlds' ledgers next to the sessions whose
// observations the facts came from.
const ledgerSchema = `
CREATE TABLE IF NOT EXISTS ledger_facts (
	seq    INTEGER PRIMARY KEY AUTOINCREMENT,
	world  TEXT NOT NULL,
	record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_facts_world ON ledger_facts(world, seq);
`

var _ fiction.Store = (*DB)(nil)

// AppendFacts implements fiction.Store: the batch is committed with the
// store's other writes, atomically.
func (d *DB) AppendFacts(ctx context.Context, world string, facts []fiction.Fact) error {
	if len(facts) == 0 {
		return nil
	}
	recs := make([]string, len(facts))
	for i, f := range facts {
		b, err := json.Marshal(f)
		if err != nil {
			return err
		}
		recs[i] = string(b)
	}
	return d.do(ctx, func(ctx context.Context, tx *batchTx) error {
		for _, r := range recs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_facts(world, record) VALUES(?,?)`, world, r); err != nil {
				return fmt.Errorf("store ledger of world %s: %w", world, err)
			}
		}
		return nil
	})
}

// WorldFacts implements fiction.Store, in recording order.
func (d *DB) WorldFacts(ctx context.Context, world string) ([]fiction.Fact, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT seq, record FROM ledger_facts WHERE world = ? ORDER BY seq`, world)
	if err != nil {
		return nil, fmt.Errorf("load ledger of world %s: %w", world, err)
	}
	defer rows.Close()
	var out []fiction.Fact
	for rows.Next() {
		var seq int64
		var raw string
		if err := rows.Scan(&seq, &raw); err != nil {
			return nil, err
		}
		var f fiction.Fact
		if err := json.Unmarshal([]byte(raw), &f); err != nil {
			return nil, fmt.Errorf("ledger of world %s, fact %d: %w", world, seq, err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}
