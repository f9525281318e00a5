package app

import (
	"context"
	"errors"
	"net"
	"testing"
)

// TestDefaultReplicas: the default replica count is one per server of the
// cluster up to 3, the servers being this one and every distinct route
// that does not lead back to it, so routes naming every node (this one's
// too, as the docs ask) count each node once.
func TestDefaultReplicas(t *testing.T) {
	// a machine at 10.0.0.1 named node1.example.com, whose resolver
	// knows the nodes' names
	m := machine{
		IPs:      []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1"), net.ParseIP("::1")},
		Hostname: "node1.example.com",
		Lookup: func(_ context.Context, host string) ([]net.IPAddr, error) {
			ip, ok := map[string]string{"localhost": "127.0.0.1", "node1": "10.0.0.1", "node1.example.com": "10.0.0.1",
				"n1.internal": "10.0.0.1", "node2": "10.0.0.2", "node3": "10.0.0.3", "node1.dc2": "10.0.0.9"}[host]
			if !ok {
				return nil, errors.New("no such host")
			}
			return []net.IPAddr{{IP: net.ParseIP(ip)}}, nil
		},
	}
	loop := func(ports ...string) []string {
		var out []string
		for _, p := range ports {
			out = append(out, "nats://127.0.0.1:"+p)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		listen string
		routes []string
		want   int
	}{
		{"one node, its own route only", "127.0.0.1:7001", loop("7001"), 1},
		{"two nodes", "127.0.0.1:7001", loop("7001", "7002"), 2},
		{"three nodes", "127.0.0.1:7002", loop("7001", "7002", "7003"), 3},
		{"five nodes", "127.0.0.1:7003", loop("7001", "7002", "7003", "7004", "7005"), 3},
		{"routes without the own address", "127.0.0.1:7001", loop("7002"), 2},
		{"two routes without the own address", "127.0.0.1:7001", loop("7002", "7003"), 3},
		{"no routes", "127.0.0.1:7001", nil, 1},
		{"a route listed twice counts once", "127.0.0.1:7001", []string{"nats://127.0.0.1:7001", "nats://127.0.0.1:7002", " nats://127.0.0.1:7002"}, 2},
		{"names: every address, own host name", "0.0.0.0:6222", []string{"nats://node1:6222", "nats://node2:6222"}, 2},
		{"names: the full host name", ":6222", []string{"nats://NODE1.example.com:6222", "nats://node2:6222"}, 2},
		{"names: a name resolving to an interface", "[::]:6222", []string{"nats://n1.internal:6222", "nats://node2:6222"}, 2},
		{"names: localhost", "0.0.0.0:6222", []string{"nats://localhost:6222", "nats://node2:6222"}, 2},
		{"names: an interface address", "0.0.0.0:6222", []string{"nats://10.0.0.1:6222", "nats://10.0.0.2:6222"}, 2},
		{"names: this host on another port is another server", "0.0.0.0:6222", []string{"nats://node1:6223", "nats://node2:6222"}, 3},
		{"names: an unresolvable name is another server", "0.0.0.0:6222", []string{"nats://node1:6222", "nats://node9:6222"}, 2},
		// a Kubernetes pod's own name, not in DNS until it is ready
		{"names: an unresolvable name whose first label is this host's", "0.0.0.0:6222",
			[]string{"nats://Node1.svc.local:6222", "nats://node2.svc.local:6222"}, 2},
		{"names: an unresolvable name with this host's first label on another port", "0.0.0.0:6222",
			[]string{"nats://node1.svc.local:6223", "nats://node2:6222"}, 3},
		{"names: a name with this host's first label resolving elsewhere", "0.0.0.0:6222",
			[]string{"nats://node1.dc2:6222", "nats://node2:6222"}, 3},
		{"names: an unresolvable name whose first label is another's", "0.0.0.0:6222",
			[]string{"nats://node10.svc.local:6222", "nats://node2:6222"}, 3},
		{"a listen IP: an unresolvable name with this host's first label is another server", "10.0.0.1:6222",
			[]string{"nats://node1.svc.local:6222", "nats://node2:6222"}, 3},
		{"a listen IP: only it is this server", "10.0.0.1:6222", []string{"nats://10.0.0.1:6222", "nats://node2:6222", "nats://node3:6222"}, 3},
		{"a listen IP: a name resolving to it", "10.0.0.1:6222", []string{"nats://node1:6222", "nats://node2:6222"}, 2},
		{"a listen IP: another interface's address is not it", "10.0.0.1:6222", []string{"nats://127.0.0.1:6222", "nats://node2:6222"}, 3},
		{"a listen name", "node1:6222", []string{"nats://node1:6222", "nats://10.0.0.1:6222", "nats://node2:6222"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := defaultReplicas(1 + len(otherRoutes(context.Background(), tc.listen, tc.routes, m))); got != tc.want {
				t.Errorf("defaultReplicas(%s, %v) = %d, want %d", tc.listen, tc.routes, got, tc.want)
			}
		})
	}
	// this machine: its loopback routes, one of them its own
	if got, want := defaultReplicas(1+len(otherRoutes(context.Background(), "127.0.0.1:7001", loop("7001", "7002"), thisMachine()))), 2; got != want {
		t.Errorf("on this machine: %d replicas, want %d", got, want)
	}
}
