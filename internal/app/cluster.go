package app

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentworld/agentworld/internal/fielderr"
	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/natsconn"
)

// ClusterConfig keeps sessions in NATS JetStream, so that the nodes of a
// cluster share them: either an embedded NATS server in this process
// (StoreDir, with Listen and Routes to form a cluster with other nodes'
// embedded servers) or an existing NATS cluster (URL).
type ClusterConfig struct {
	// URL joins an existing NATS cluster (nats://host:4222, several
	// separated by commas); "" runs the embedded server.
	URL string
	// StoreDir is the embedded server's JetStream directory; required
	// without URL.
	StoreDir string
	// Listen is the embedded server's HOST:PORT for other servers' routes;
	// "" runs a single server.
	Listen string
	// Routes are the embedded servers' nats://HOST:PORT route addresses,
	// this one's own among them or not; nil means none (Listen needs at
	// least one other server's).
	Routes []string
	// Node names this node in the ownership records (and its embedded
	// server); required.
	Node string
	// Addr is this node's HTTP base URL, where other nodes forward the
	// requests of its sessions; required.
	Addr string
	// Replicas is how many servers keep the sessions; 0 means one per
	// embedded server of the cluster up to 3 (this one and each distinct
	// route that does not lead back to it: clusterServers), or 1 with
	// URL.
	Replicas int
	// Lease is how long a silent node keeps its sessions; 0 means
	// jetstore.DefaultLease.
	Lease time.Duration
}

// openCluster starts the embedded NATS server (or connects to URL) and
// opens the JetStream store, registering closers so that a later failure
// closes them: the store, then the connection, then the server.
func (a *App) openCluster(ctx context.Context, c *ClusterConfig, log *slog.Logger) (*jetstore.Store, error) {
	if c.Node == "" {
		return nil, fielderr.New(ErrConfig, "Cluster.Node", "a cluster node needs a name")
	}
	if c.Addr == "" {
		return nil, fielderr.New(ErrConfig, "Cluster.Addr", "a cluster node needs the HTTP address other nodes reach it at")
	}
	replicas := c.Replicas
	var nc *nats.Conn
	var seen func() int // the servers the embedded one sees; nil with URL
	switch {
	case c.URL != "":
		if c.StoreDir != "" || c.Listen != "" || len(c.Routes) > 0 {
			return nil, fielderr.New(ErrConfig, "Cluster.URL", "join an existing NATS cluster or run an embedded server, not both")
		}
		var err error
		nc, err = natsconn.Dial(c.URL, "agentworld "+c.Node)
		if err != nil {
			return nil, fielderr.Wrap(ErrConfig, "Cluster.URL", err)
		}
		if replicas == 0 {
			replicas = 1
		}
	default:
		if c.StoreDir == "" {
			return nil, fielderr.New(ErrConfig, "Cluster.StoreDir", "the embedded NATS server needs a store directory")
		}
		servers := clusterServers(ctx, c.Listen, c.Routes, thisMachine())
		if c.Listen != "" && servers == 1 {
			// nats-server runs JetStream in a cluster only with a route to
			// another server: alone it never starts (no routes) or waits
			// for routing for ever (a route to itself only)
			return nil, fielderr.New(ErrConfig, "Cluster.Routes", "the routes name no server but this one (%s), and an embedded cluster needs at least one other: list every node's route address, or give no route listen address to run a single node", c.Listen)
		}
		srv, err := jetstore.StartServer(jetstore.ServerOptions{
			Name: natsName(c.Node), StoreDir: c.StoreDir, Listen: c.Listen, Routes: c.Routes, Logger: log,
		})
		if err != nil {
			return nil, fielderr.Wrap(ErrConfig, "Cluster.Listen", err)
		}
		a.opened("NATS server", func(context.Context) error { srv.Shutdown(); return nil })
		if nc, err = srv.Connect(); err != nil {
			return nil, err
		}
		if replicas == 0 {
			replicas = defaultReplicas(servers)
		}
		seen = srv.Servers
	}
	a.opened("NATS connection", func(context.Context) error { nc.Close(); return nil })
	log.Info("cluster store", "replicas", replicas, "replicas_set", c.Replicas != 0)
	if err := step(ctx, "nats"); err != nil {
		return nil, err
	}
	st, err := jetstore.New(ctx, nc, &jetstore.Options{
		Node: c.Node, Addr: c.Addr, Replicas: replicas, Lease: c.Lease, Servers: seen, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	// The manager closes the store when it closes; this closes it when no
	// manager was made (Close is safe twice).
	a.opened("cluster store", func(context.Context) error { return st.Close() })
	return st, step(ctx, "cluster store")
}

// natsName makes a node name usable as a NATS server name (no spaces).
func natsName(node string) string { return strings.ReplaceAll(node, " ", "_") }
