package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
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
	// Routes are the embedded servers' nats://HOST:PORT (or
	// nats-route://) route addresses, this one's own among them or not;
	// nil means none (Listen needs at least one other server's).
	Routes []string
	// Node names this node in the ownership records (and its embedded
	// server); required.
	Node string
	// Addr is this node's HTTP base URL, where other nodes forward the
	// requests of its sessions; required.
	Addr string
	// Replicas is how many servers keep the sessions; 0 means one per
	// embedded server of the cluster up to 3 (this one and each distinct
	// route that does not lead back to it: otherRoutes), or 1 with
	// URL. More than those servers, or than JetStream's 5, is refused.
	Replicas int
	// Lease is how long a silent node keeps its sessions; 0 means
	// jetstore.DefaultLease.
	Lease time.Duration
}

// clusterPlan is what checkCluster found of a cluster configuration.
type clusterPlan struct {
	// others are the embedded server's routes to other servers
	// (otherRoutes); nil with URL or without Listen.
	others []string
	// servers is how many servers the embedded server's cluster has: this
	// one and others; 0 with URL.
	servers int
}

// maxReplicas is the most replicas JetStream keeps of a stream.
const maxReplicas = 5

// checkCluster refuses a cluster configuration that cannot work before
// anything starts: a route that is no nats://HOST:PORT URL (nats-server
// would crash on it), a route listen address that is no HOST:PORT or
// whose port is taken, routes that name no other server, and more
// replicas than servers (JetStream would wait a minute to place them, and
// fail).
func checkCluster(ctx context.Context, c *ClusterConfig) (clusterPlan, error) {
	if c.Node == "" {
		return clusterPlan{}, fielderr.New(ErrConfig, "Cluster.Node", "a cluster node needs a name")
	}
	if c.Addr == "" {
		return clusterPlan{}, fielderr.New(ErrConfig, "Cluster.Addr", "a cluster node needs the HTTP address other nodes reach it at")
	}
	if c.Replicas < 0 {
		return clusterPlan{}, fielderr.New(ErrConfig, "Cluster.Replicas", "%d replicas: want 1 or more (0: the default)", c.Replicas)
	}
	if c.URL != "" {
		if c.StoreDir != "" || c.Listen != "" || len(c.Routes) > 0 {
			return clusterPlan{}, fielderr.New(ErrConfig, "Cluster.URL", "join an existing NATS cluster or run an embedded server, not both")
		}
		return clusterPlan{}, checkMaxReplicas(c.Replicas)
	}
	if c.StoreDir == "" {
		return clusterPlan{}, fielderr.New(ErrConfig, "Cluster.StoreDir", "the embedded NATS server needs a store directory")
	}
	for _, r := range c.Routes {
		if strings.TrimSpace(r) == "" {
			continue
		}
		if _, err := jetstore.ParseRoute(strings.TrimSpace(r)); err != nil {
			return clusterPlan{}, fielderr.Wrap(ErrConfig, "Cluster.Routes", err)
		}
	}
	if c.Listen == "" {
		if slices.ContainsFunc(c.Routes, func(r string) bool { return strings.TrimSpace(r) != "" }) {
			return clusterPlan{}, fielderr.New(ErrConfig, "Cluster.Routes", "routes need a route listen address (Cluster.Listen) for the other servers' routes")
		}
	} else {
		if _, port, err := net.SplitHostPort(c.Listen); err != nil {
			return clusterPlan{}, fielderr.Wrap(ErrConfig, "Cluster.Listen", err)
		} else if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return clusterPlan{}, fielderr.New(ErrConfig, "Cluster.Listen", "%s: want a port from 1 to 65535", c.Listen)
		}
		// a port in use fails here, with its cause, rather than as a
		// server that is never ready (the embedded server catches one
		// taken meanwhile too, if later)
		ln, err := net.Listen("tcp", c.Listen)
		if err != nil {
			return clusterPlan{}, fielderr.Wrap(ErrConfig, "Cluster.Listen", err)
		}
		_ = ln.Close()
	}
	plan := clusterPlan{servers: 1}
	if c.Listen != "" {
		plan.others = otherRoutes(ctx, c.Listen, c.Routes, thisMachine())
		plan.servers += len(plan.others)
		if plan.servers == 1 {
			// nats-server runs JetStream in a cluster only with a route to
			// another server: alone it never starts (no routes) or waits
			// for routing for ever (a route to itself only)
			return clusterPlan{}, fielderr.New(ErrConfig, "Cluster.Routes", "the routes name no server but this one (%s), and an embedded cluster needs at least one other: list every node's route address, or give no route listen address to run a single node", c.Listen)
		}
	}
	if c.Replicas > plan.servers {
		return clusterPlan{}, fielderr.New(ErrConfig, "Cluster.Replicas", "%d replicas, but the cluster has %d %s (this node and each distinct route that is not its own), and each replica needs a server of its own", c.Replicas, plan.servers, map[bool]string{true: "server", false: "servers"}[plan.servers == 1])
	}
	return plan, checkMaxReplicas(c.Replicas)
}

// checkMaxReplicas refuses more replicas than JetStream keeps.
func checkMaxReplicas(replicas int) error {
	if replicas > maxReplicas {
		return fielderr.New(ErrConfig, "Cluster.Replicas", "%d replicas, but JetStream keeps at most %d", replicas, maxReplicas)
	}
	return nil
}

// openCluster starts the embedded NATS server (or connects to URL) and
// opens the JetStream store, registering closers so that a later failure
// closes them: the store, then the connection, then the server. plan is
// checkCluster's.
func (a *App) openCluster(ctx context.Context, c *ClusterConfig, plan clusterPlan, log *slog.Logger) (*jetstore.Store, error) {
	replicas := c.Replicas
	var nc *nats.Conn
	var srv jetstore.Embedded // nil with URL
	if c.URL != "" {
		var err error
		nc, err = natsconn.Dial(c.URL, "agentworld "+c.Node)
		if err != nil {
			return nil, fielderr.Wrap(ErrConfig, "Cluster.URL", err)
		}
		if replicas == 0 {
			replicas = 1
		}
	} else {
		var err error
		srv, err = jetstore.StartServer(jetstore.ServerOptions{
			Name: natsName(c.Node), StoreDir: c.StoreDir, Listen: c.Listen, Routes: c.Routes, Logger: log,
		})
		if err != nil {
			return nil, serverErr(c, err)
		}
		a.opened("NATS server", func(context.Context) error { srv.Shutdown(); return nil })
		if nc, err = srv.Connect(); err != nil {
			return nil, err
		}
		if replicas == 0 {
			replicas = defaultReplicas(plan.servers)
		}
	}
	a.opened("NATS connection", func(context.Context) error { nc.Close(); return nil })
	log.Info("cluster store", "replicas", replicas, "replicas_set", c.Replicas != 0)
	if err := step(ctx, "nats"); err != nil {
		return nil, err
	}
	o := &jetstore.Options{Node: c.Node, Addr: c.Addr, Replicas: replicas, Lease: c.Lease, Logger: log}
	var stopWatch func()
	if srv != nil {
		o.Servers = srv.Servers
		if len(plan.others) > 0 {
			stopWatch = watchRoutes(ctx, srv, plan, log)
		}
	}
	st, err := jetstore.New(ctx, nc, o)
	if stopWatch != nil {
		stopWatch()
	}
	if err != nil && ctx.Err() != nil {
		// stopped (a SIGTERM during a slow start), however far the routes
		// got: no configuration error
		return nil, fmt.Errorf("startup stopped opening the cluster store: %w", ctx.Err())
	}
	if err != nil {
		if srv != nil && len(plan.others) > 0 && srv.Servers() < plan.servers {
			return nil, &fielderr.Error{Kind: ErrConfig, Path: "Cluster.Routes", Err: err, Msg: fmt.Sprintf(
				"this node's embedded server reached %d of the cluster's %d servers in the %s a node waits for the others to start; routes never connected: %s",
				srv.Servers(), plan.servers, jetstore.DefaultSetupTimeout, strings.Join(unconnectedRoutes(ctx, plan.others, srv.RouteAddrs(), thisMachine()), ", "))}
		}
		return nil, err
	}
	// The manager closes the store when it closes; this closes it when no
	// manager was made (Close is safe twice).
	a.opened("cluster store", func(context.Context) error { return st.Close() })
	return st, step(ctx, "cluster store")
}

// serverErr names the field of an error of jetstore.StartServer: the
// route listen address when the error is about it (jetstore.ErrListen:
// a port taken since checkCluster looked), else the store directory, the
// other thing the embedded server is given (its store could not be
// created or opened, or this program has no embedded server, which a
// store directory asks for).
func serverErr(c *ClusterConfig, err error) error {
	if c.Listen != "" && errors.Is(err, jetstore.ErrListen) {
		return fielderr.Wrap(ErrConfig, "Cluster.Listen", err)
	}
	return fielderr.Wrap(ErrConfig, "Cluster.StoreDir", err)
}

// routesWarnEvery is how often a node warns while its embedded server's
// routes have not all connected.
const routesWarnEvery = 10 * time.Second

// watchRoutes warns every routesWarnEvery, until the returned stop is
// called, while srv reaches fewer servers than plan's, naming the routes
// not connected yet.
func watchRoutes(ctx context.Context, srv jetstore.Embedded, plan clusterPlan, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(routesWarnEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if n := srv.Servers(); n < plan.servers {
				log.Warn(fmt.Sprintf("embedded NATS server: routes not connected yet; the cluster store waits for every node (up to %s)", jetstore.DefaultSetupTimeout),
					"servers", n, "want", plan.servers, "unconnected", unconnectedRoutes(ctx, plan.others, srv.RouteAddrs(), thisMachine()))
			}
		}
	}()
	return func() { close(done); <-exited }
}

// natsName makes a node name usable as a NATS server name (no spaces).
func natsName(node string) string { return strings.ReplaceAll(node, " ", "_") }
