package store_test

import (
	"path/filepath"
	"testing"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/store/storetest"
)

// TestConformance runs the session-store suite against the SQLite store,
// reopening the same file for the persistence checks.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (sim.Store, func(t *testing.T) sim.Store) {
		path := filepath.Join(t.TempDir(), "sessions.db")
		db, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return db, func(t *testing.T) sim.Store {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := store.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			return again
		}
	})
}
