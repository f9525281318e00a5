package sim_test

import (
	"testing"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store/storetest"
)

// TestMemStoreConformance runs the session-store suite against MemStore
// (which keeps nothing across a reopen).
func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) (sim.Store, func(t *testing.T) sim.Store) {
		return sim.NewMemStore(), nil
	})
}
