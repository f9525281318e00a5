package natsserver

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	n := natsLog{l: slog.New(slog.NewTextHandler(&buf, nil))}
	n.Noticef("JetStream cluster new stream leader for '%s > %s'", "$G", "S")
	n.Noticef("Listening for route connections on %s", "127.0.0.1:1")
	out := buf.String()
	if !strings.Contains(out, `level=INFO msg="JetStream cluster new stream leader for '$G > S'"`) || strings.Contains(out, "Listening") {
		t.Fatalf("log:\n%s\nwant the leader notice at info level only", out)
	}
}

// TestServersCountsRoutedServers: Servers counts this server and those
// its routes reach, each once: two servers whose routes name both (a
// route to itself among them, which nats-server drops) see two.
func TestServersCountsRoutedServers(t *testing.T) {
	var listen, routes []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listen = append(listen, ln.Addr().String())
		routes = append(routes, "nats://"+ln.Addr().String())
		_ = ln.Close()
	}
	var servers []*Server
	for i, l := range listen {
		s, err := Start(jetstore.ServerOptions{Name: fmt.Sprintf("s%d", i), StoreDir: t.TempDir(), Listen: l, Routes: routes})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Shutdown)
		servers = append(servers, s)
	}
	for end := time.Now().Add(time.Minute); ; {
		got := []int{servers[0].Servers(), servers[1].Servers()}
		if got[0] == 2 && got[1] == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the servers see %v servers, want 2 each", got)
		}
		time.Sleep(20 * time.Millisecond) // polling a count nats-server keeps
	}
}

// TestStartFailsAtOnceOnBusyPort: a route listen port in use fails Start
// at once with nats-server's reason, not after its 30 s wait for a server
// that never gets ready.
func TestStartFailsAtOnceOnBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	start := time.Now()
	s, err := Start(jetstore.ServerOptions{Name: "busy", StoreDir: t.TempDir(), Listen: ln.Addr().String(), Routes: []string{"nats://127.0.0.1:1"}})
	if err == nil {
		s.Shutdown()
		t.Fatal("Start on a port in use succeeded")
	}
	if d := time.Since(start); d > 10*time.Second || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Start = %v after %s, want the port in use within 10 s", err, d)
	}
	if !errors.Is(err, jetstore.ErrListen) {
		t.Errorf("Start = %v, want jetstore.ErrListen", err)
	}
}

// TestStartStoreFailureIsNoListenError: a store directory JetStream
// cannot create fails Start at once, and is no error of the listen
// address, with or without one.
func TestStartStoreFailureIsNoListenError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	_ = ln.Close()
	for _, o := range []jetstore.ServerOptions{
		{Name: "store", StoreDir: filepath.Join(file, "nats")},
		{Name: "store", StoreDir: filepath.Join(file, "nats"), Listen: listen, Routes: []string{"nats://127.0.0.1:1"}},
	} {
		start := time.Now()
		s, err := Start(o)
		if err == nil {
			s.Shutdown()
			t.Fatalf("Start with store %s succeeded", o.StoreDir)
		}
		if d := time.Since(start); d > 10*time.Second || errors.Is(err, jetstore.ErrListen) {
			t.Errorf("Start (listen %q) = %v after %s, want a store error within 10 s, not jetstore.ErrListen", o.Listen, err, d)
		}
	}
}

// TestStartRefusesBadRoute: a route nats-server cannot parse is refused
// (nats-server itself would crash on it once routing starts).
func TestStartRefusesBadRoute(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	_ = ln.Close() // a port free a moment ago, which no server takes
	for _, r := range []string{"127.0.0.1:7002", "nats//127.0.0.1:7002", "nats://127.0.0.1"} {
		s, err := Start(jetstore.ServerOptions{Name: "bad", StoreDir: t.TempDir(), Listen: listen, Routes: []string{r}})
		if err == nil {
			s.Shutdown()
			t.Fatalf("Start with route %q succeeded", r)
		}
		if !strings.Contains(err.Error(), r) {
			t.Errorf("Start with route %q = %v, want it named", r, err)
		}
	}
}
