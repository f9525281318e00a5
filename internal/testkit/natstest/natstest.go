// Package natstest runs a NATS server with JetStream on loopback for a
// test whose child processes (testkit.Child) connect to it by URL, as
// work-queue workers and coordinators do. In-process tests can use
// jetstore.StartServer instead, which takes no network clients.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
