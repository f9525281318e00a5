package natsserver

import (
	"testing"

	"github.com/agentworld/agentworld/internal/jetstore"
)

// TestRaftClockIsSet: starting an embedded server sets nats-server's RAFT
// clock (raftclock.go). A nats-server whose variables were renamed (a
// go:linkname to a missing variable links to a new one of its own, which
// nats-server never reads) or whose defaults changed fails here instead
// of silently keeping 4 to 9 s elections; and the clock is set only over
// those defaults.
func TestRaftClockIsSet(t *testing.T) {
	s, err := Start(jetstore.ServerOptions{Name: "clock", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if clockErr != nil {
		t.Fatalf("RAFT clock not set: %v", clockErr)
	}
	if got := currentRaftClock(); got != fastRaft {
		t.Fatalf("nats-server's RAFT clock is %+v, want %+v", got, fastRaft)
	}
	if err := setRaftClock(fastRaft); err == nil {
		t.Fatal("setRaftClock changed a clock that no longer held nats-server's defaults")
	}
}
