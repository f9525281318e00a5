package cli

import (
	"errors"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/app"
	"github.com/agentworld/agentworld/internal/jetstore"
)

// clusterFlags are serve's flags that keep sessions in NATS JetStream,
// shared by the nodes of a cluster.
type clusterFlags struct {
	url, listen, store, node, advertise string
	routes                              []string
	replicas                            int
	lease                               time.Duration
}

func (c *clusterFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&c.url, "cluster", "", "join an existing NATS JetStream cluster (nats://HOST:4222, comma-separated) and keep sessions there, shared with the other nodes, instead of in --db")
	fl.StringVar(&c.listen, "nats-listen", "", "run an embedded NATS server whose cluster routes listen on HOST:PORT; with --nats-routes, agentworld nodes form a cluster by themselves (sessions in JetStream instead of --db)")
	fl.StringSliceVar(&c.routes, "nats-routes", nil, "every node's --nats-listen address as nats://HOST:PORT (comma-separated or repeated; the same list on each node, its own address among them or not)")
	fl.StringVar(&c.store, "nats-store", "", "the embedded NATS server's JetStream directory (required with --nats-listen; alone, it runs a single-node JetStream store)")
	fl.StringVar(&c.node, "node", "", "this node's name in the cluster (default: its --advertise URL)")
	fl.StringVar(&c.advertise, "advertise", "", "the HTTP base URL other nodes forward this node's sessions to (default: http:// + --addr)")
	fl.IntVar(&c.replicas, "nats-replicas", 0, "servers keeping each session (0: one per embedded server up to 3, counting this node and each distinct --nats-routes address that is not its own; 1 with --cluster); at most those servers, and 5")
	fl.DurationVar(&c.lease, "lease", jetstore.DefaultLease, "how long a silent node keeps its sessions before other nodes take them over")
}

// config is the app's cluster configuration, nil when no cluster flag is
// given; addr is serve's --addr.
func (c *clusterFlags) config(addr string) (*app.ClusterConfig, error) {
	if c.url == "" && c.listen == "" && c.store == "" {
		if len(c.routes) > 0 {
			return nil, flagErr("nats-routes", errors.New("routes need --nats-listen and --nats-store"))
		}
		return nil, nil
	}
	if c.url == "" && c.store == "" {
		return nil, flagErr("nats-store", errors.New("the embedded NATS server needs a directory"))
	}
	adv := c.advertise
	if adv == "" {
		if strings.HasSuffix(addr, ":0") {
			return nil, flagErr("advertise", errors.New("give the URL other nodes reach this one at (--addr has no fixed port)"))
		}
		adv = "http://" + addr
	}
	node := c.node
	if node == "" {
		node = strings.NewReplacer("http://", "", "https://", "", "/", "_", ":", "_").Replace(adv)
	}
	return &app.ClusterConfig{URL: c.url, StoreDir: c.store, Listen: c.listen, Routes: c.routes,
		Node: node, Addr: adv, Replicas: c.replicas, Lease: c.lease}, nil
}
