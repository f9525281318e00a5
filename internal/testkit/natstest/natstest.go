// Package natstest runs a NATS server with JetStream on loopback for a
// test whose child processes (testkit.Child) connect to it by URL, as
// work-queue workers and coordinators do. In-process tests can use
// jetstore.StartServer instead, which takes no network clients.
package natstest

import (
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentworld/agentworld/internal/natsserver"
)

// Start starts a single NATS server with JetStream (its files in a
// temporary directory, synced on every write as the embedded server of
// package natsserver does) listening on a random loopback port, stops it
// when the test ends, and returns its client URL (nats://127.0.0.1:PORT).
func Start(t testing.TB) string {
	t.Helper()
	return StartWith(t, nil)
}

// Options configure [StartWith]. Nil means every default.
type Options struct {
	// MaxPayload is the largest message the server takes, in bytes; 0
	// means NATS's default of 1 MiB. Tests of values larger than a
	// message set it small, so that their values stay small too.
	MaxPayload int32
}

// StartWith is [Start] with options.
func StartWith(t testing.TB, o *Options) string {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	raftClock(t)
	s, err := server.NewServer(&server.Options{
		ServerName: "natstest", Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(), SyncAlways: true, MaxPayload: o.MaxPayload,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	// Only a hang: a loaded machine may take a while.
	if !s.ReadyForConnections(2 * time.Minute) {
		t.Fatal("NATS server not ready after 2 minutes")
	}
	return s.ClientURL()
}

// StartCluster starts n NATS servers with JetStream clustered on
// loopback (each as [Start]'s server, its routes on a [FreePorts] port)
// and returns their client URLs.
func StartCluster(t testing.TB, n int, o *Options) []string {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	raftClock(t)
	ports := FreePorts(t, n)
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats", Host: "127.0.0.1:" + strconv.Itoa(p)})
	}
	servers := make([]*server.Server, n)
	for i := range n {
		s, err := server.NewServer(&server.Options{
			ServerName: "natstest-" + strconv.Itoa(i), Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true,
			JetStream: true, StoreDir: t.TempDir(), SyncAlways: true, MaxPayload: o.MaxPayload,
			Cluster: server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: ports[i]},
			Routes:  routes,
		})
		if err != nil {
			t.Fatal(err)
		}
		go s.Start() // a clustered server's start waits for its routes
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		servers[i] = s
	}
	urls := make([]string, n)
	for i, s := range servers {
		if !s.ReadyForConnections(2 * time.Minute) {
			t.Fatalf("NATS server %d not ready after 2 minutes", i)
		}
		urls[i] = s.ClientURL()
	}
	return urls
}

// raftClock gives the servers the embedded servers' RAFT clock
// (natsserver.SetRaftClock): tests elect new leaders as fast as serve's
// nodes do, whichever test of the binary started a server first.
func raftClock(t testing.TB) {
	if err := natsserver.SetRaftClock(); err != nil {
		t.Log(err)
	}
}

// FreePorts returns n loopback ports free a moment ago, chosen below the
// kernel's ephemeral range (32768 and up on Linux): the ports that other
// tests' listeners on port 0 and every outgoing connection take are drawn
// from that range, and could take one of these between this check and a
// server's listen.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	out := make([]int, 0, n)
	for tries := 0; len(out) < n; tries++ {
		if tries == 1000 {
			t.Fatal("no free loopback port in 20000-32767")
		}
		p := 20000 + rand.IntN(12768)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		_ = ln.Close()
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
