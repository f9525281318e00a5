package jetstore

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
)

// DefaultClusterName is the NATS cluster name of embedded servers.
const DefaultClusterName = "agentworld"

// MaxPayload is the embedded server's largest message: a session's first
// message holds its spec, system prompt and a fork's turns, bounded by
// sim.DefaultMaxSessionBytes (64 MiB, also NATS's own ceiling).
const MaxPayload = 64 << 20

// ServerOptions configures an embedded NATS server.
type ServerOptions struct {
	// Name is the server's name, unique in its cluster; required.
	Name string
	// StoreDir is where JetStream keeps its files; required.
	StoreDir string
	// Listen is the HOST:PORT other servers' routes connect to; "" runs a
	// single server that forms no cluster.
	Listen string
	// Routes are the nats://HOST:PORT route addresses (as ParseRoute
	// takes them) of the other servers; nil means none. This one's own
	// may be among them (nats-server drops a route to itself once it
	// connects), but then it is no server of its own: a default replica
	// count must not count it (internal/app's defaultReplicas).
	Routes []string
	// ClusterName is the cluster's name; "" means DefaultClusterName.
	ClusterName string
	// Logger receives the server's log at warning level and above; nil
	// discards it.
	Logger *slog.Logger
}

// ParseRoute parses a route address of ServerOptions.Routes: a
// nats://HOST:PORT URL (nats-route://, the scheme nats-server's own
// configuration files use, is taken too). It checks the form only, never
// that HOST resolves: a route to a node not yet published in DNS (a
// Kubernetes pod still starting) is connected once it is. nats-server
// itself parses routes without a word about errors, and a route it cannot
// parse crashes it when it starts routing.
func ParseRoute(route string) (*url.URL, error) {
	u, err := url.Parse(route)
	if err != nil {
		return nil, fmt.Errorf("route %q is not a nats://HOST:PORT URL: %w", route, err)
	}
	if u.Scheme != "nats" && u.Scheme != "nats-route" {
		return nil, fmt.Errorf("route %q is not a nats://HOST:PORT URL (its scheme must be nats://)", route)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("route %q is not a nats://HOST:PORT URL (no host)", route)
	}
	if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
		return nil, fmt.Errorf("route %q is not a nats://HOST:PORT URL (want a port from 1 to 65535)", route)
	}
	return u, nil
}

// Embedded is a NATS server running in this process.
type Embedded interface {
	// Connect opens an in-process connection.
	Connect() (*nats.Conn, error)
	// Shutdown stops the server and waits for it.
	Shutdown()
	// Servers is how many servers of the cluster this one sees now: it
	// and those its routes are connected to.
	Servers() int
	// RouteAddrs are the remote addresses of its route connections now
	// (a connection the other server made has that server's own port).
	RouteAddrs() []netip.AddrPort
}

// ErrNoEmbeddedServer: this program does not link the embedded NATS
// server (internal/natsserver registers it when imported; the agentworld
// binary does).
var ErrNoEmbeddedServer = errors.New("this program was built without the embedded NATS server (import internal/natsserver, as cmd/agentworld does), so join an existing NATS cluster with --cluster nats://HOST:4222 instead")

// ErrListen marks a StartServer error about ServerOptions.Listen: an
// address that is no HOST:PORT, or a route listener the server could not
// open (a port taken). Other errors are about the server or its store.
var ErrListen = errors.New("route listen address")

var (
	serverMu sync.Mutex
	starter  func(ServerOptions) (Embedded, error)
)

// RegisterServer makes start the embedded server StartServer runs;
// internal/natsserver registers itself when imported.
func RegisterServer(start func(ServerOptions) (Embedded, error)) {
	serverMu.Lock()
	starter = start
	serverMu.Unlock()
}

// StartServer starts the registered embedded NATS server, or fails with
// ErrNoEmbeddedServer when none is linked in. An error about the route
// listen address is ErrListen.
func StartServer(o ServerOptions) (Embedded, error) {
	serverMu.Lock()
	start := starter
	serverMu.Unlock()
	if start == nil {
		return nil, ErrNoEmbeddedServer
	}
	return start(o)
}
