package natsserver

import (
	"fmt"
	"time"
	_ "unsafe" // go:linkname

	_ "github.com/nats-io/nats-server/v2/server" // the variables below
)

// The RAFT clock of the embedded server. nats-server's followers wait
// 4 to 9 seconds without hearing from a leader before they elect a new
// one (leaders send a heartbeat every second); while a stream or
// key-value bucket has no leader nothing can be appended to it, so a
// node killed while it led the session transcripts or the ownership
// buckets stopped every session for 5 to 12 seconds. Those timings are
// package variables of nats-server's server package with no option to
// set them (its own test suite assigns them in an init function), so
// they are reached here by go:linkname, checked against nats-server
// v2.15.2 (server/raft.go). They are set once, before the first embedded
// server starts, and only while they still hold v2.15.2's defaults: a
// nats-server that renamed or changed them leaves its own timing in
// place, [Start] logs why, and TestRaftClockIsSet fails.
//
// These are process-wide: they change every embedded server of this
// process and nothing of an external NATS cluster joined with --cluster,
// which keeps its own (default) timing.
var (
	//go:linkname raftHeartbeat github.com/nats-io/nats-server/v2/server.hbInterval
	raftHeartbeat time.Duration
	//go:linkname raftMinElection github.com/nats-io/nats-server/v2/server.minElectionTimeout
	raftMinElection time.Duration
	//go:linkname raftMaxElection github.com/nats-io/nats-server/v2/server.maxElectionTimeout
	raftMaxElection time.Duration
)

// natsDefaults is the RAFT clock of nats-server v2.15.2.
var natsDefaults = raftClock{Heartbeat: time.Second, MinElection: 4 * time.Second, MaxElection: 9 * time.Second}

// fastRaft is the embedded servers' RAFT timing. A leader that is not
// appending sends a heartbeat every Heartbeat; a follower that hears
// nothing from its leader for a random time between MinElection and
// MaxElection stands for election, so a group whose leader died has a
// new one that long after (plus a vote round trip).
//
// MinElection is six heartbeats: a follower starved of CPU for 1.5 s
// (six missed heartbeats in a row) on a loaded machine starts an
// election it did not need, which costs a leader change (appends wait
// for it and are retried) but loses nothing. nats-server's own test
// suite runs with 50 ms heartbeats and 1.5 to 3.5 s elections.
var fastRaft = raftClock{Heartbeat: 250 * time.Millisecond, MinElection: 1500 * time.Millisecond, MaxElection: 3 * time.Second}

// raftClock is a RAFT timing of nats-server.
type raftClock struct{ Heartbeat, MinElection, MaxElection time.Duration }

// currentRaftClock is the RAFT clock nats-server uses now.
func currentRaftClock() raftClock {
	return raftClock{Heartbeat: raftHeartbeat, MinElection: raftMinElection, MaxElection: raftMaxElection}
}

// setRaftClock sets nats-server's RAFT clock to c, if it holds
// v2.15.2's defaults. It runs once, before the first server starts
// ([Start] under clockOnce): nats-server reads the variables without
// synchronisation.
func setRaftClock(c raftClock) error {
	if cur := currentRaftClock(); cur != natsDefaults {
		return fmt.Errorf("nats-server's RAFT timing is not v2.15.2's (heartbeat %v, election %v to %v; the linked variables changed?): "+
			"kept as it is, so a dead node's streams elect new leaders after nats-server's default timeout", cur.Heartbeat, cur.MinElection, cur.MaxElection)
	}
	raftHeartbeat, raftMinElection, raftMaxElection = c.Heartbeat, c.MinElection, c.MaxElection
	return nil
}
