package natsserver

import (
	"bytes"
	"log/slog"
	"strings"
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

// TestLeaderNoticesLogged: of the server's notices, those about RAFT
// leaders reach the log at info level; the rest are dropped.
func TestLeaderNoticesLogged(t *testing.T) {
	var buf bytes.Buffer
	n := natsLog{slog.New(slog.NewTextHandler(&buf, nil))}
	n.Noticef("JetStream cluster new stream leader for '%s > %s'", "$G", "S")
	n.Noticef("Listening for route connections on %s", "127.0.0.1:1")
	out := buf.String()
	if !strings.Contains(out, `level=INFO msg="JetStream cluster new stream leader for '$G > S'"`) || strings.Contains(out, "Listening") {
		t.Fatalf("log:\n%s\nwant the leader notice at info level only", out)
	}
}
