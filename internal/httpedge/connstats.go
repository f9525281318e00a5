package httpedge

import (
	"fmt"
	"strings"
	"time"
)

// ConnStats is a snapshot of a guard's connection caps: what holds the
// slots and who waits for one. It says why a client is kept waiting
// (every connection working, or the quiet ones still within their
// grace), and a test that needs the caps in some state waits on Changed
// for it rather than sleeping.
type ConnStats struct {
	// Max is MaxConns (0 or less: no cap); PerClient is
	// MaxConnsPerClient.
	Max, PerClient int
	// Held counts the connections held; ByClient those of each capped
	// client.
	Held     int
	ByClient map[string]int
	// Waiting counts the listeners' Accepts waiting for room.
	Waiting int
	// Shed counts the connections closed to make room so far.
	Shed int
	// Quiet are the connections that may be closed to make room once
	// their grace has passed, oldest first.
	Quiet []QuietConn
	// Changed is closed at the next change of any of the above but
	// Waiting.
	Changed <-chan struct{}
}

// QuietConn is a connection in [ConnStats.Quiet].
type QuietConn struct {
	// Remote is the client's address; Client what the per-client cap
	// counts it under ("" for none).
	Remote, Client string
	// Parked: a long-lived connection waiting for its client (see
	// [Waiting]), closed only after PressureIdleTimeout. Otherwise an
	// idle keep-alive connection (Asked) or one that has sent nothing
	// yet.
	Parked, Asked bool
	// For is how long it has been quiet.
	For time.Duration
}

// ConnStats is the state of the guard's connection caps now.
func (g *Guard) ConnStats() ConnStats { return g.conns.stats() }

func (p *connPool) stats() ConnStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	st := ConnStats{Max: p.max, PerClient: p.perClient, Held: p.n, Waiting: p.waiting, Shed: p.shed,
		ByClient: make(map[string]int, len(p.byClient)), Changed: p.watchLocked()}
	for k, v := range p.byClient {
		st.ByClient[k] = v
	}
	for e := p.quiet.Front(); e != nil; e = e.Next() {
		c := e.Value.(*trackedConn)
		st.Quiet = append(st.Quiet, QuietConn{Remote: c.RemoteAddr().String(), Client: c.client,
			Parked: c.parked, Asked: c.asked, For: now.Sub(c.since)})
	}
	return st
}

// Parked counts the parked connections among the quiet ones.
func (s ConnStats) Parked() int {
	n := 0
	for _, q := range s.Quiet {
		if q.Parked {
			n++
		}
	}
	return n
}

// String is the snapshot in one line, for logs and test failures.
func (s ConnStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d held of %d (per client %d: %v), %d accepts waiting, %d shed; quiet:", s.Held, s.Max, s.PerClient, s.ByClient, s.Waiting, s.Shed)
	if len(s.Quiet) == 0 {
		b.WriteString(" none")
	}
	for _, q := range s.Quiet {
		kind := "new"
		switch {
		case q.Parked:
			kind = "parked"
		case q.Asked:
			kind = "idle"
		}
		fmt.Fprintf(&b, " [%s %s %q for %v]", q.Remote, kind, q.Client, q.For.Round(time.Millisecond))
	}
	return b.String()
}
