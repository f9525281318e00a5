package app

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUnconnectedRoutes: a route counts as connected when a route
// connection comes from its address and port, or from its address alone
// when no other route has that address (the other server dialled this
// one); a name that does not resolve is reported with why.
func TestUnconnectedRoutes(t *testing.T) {
	m := machine{Lookup: func(_ context.Context, host string) ([]net.IPAddr, error) {
		ip, ok := map[string]string{"node2": "10.0.0.2", "node3": "10.0.0.3"}[host]
		if !ok {
			return nil, errors.New("no such host")
		}
		return []net.IPAddr{{IP: net.ParseIP(ip)}}, nil
	}}
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		name   string
		others []string
		conns  []netip.AddrPort
		want   []string
	}{
		{"none connected", []string{"nats://node2:6222", "nats://node3:6222"}, nil,
			[]string{"nats://node2:6222", "nats://node3:6222"}},
		{"one dialled by this server", []string{"nats://node2:6222", "nats://node3:6222"}, []netip.AddrPort{ap("10.0.0.2:6222")},
			[]string{"nats://node3:6222"}},
		{"one dialled by the other", []string{"nats://node2:6222", "nats://node3:6222"}, []netip.AddrPort{ap("10.0.0.3:51234")},
			[]string{"nats://node2:6222"}},
		{"all connected, by name and address", []string{"nats://node2:6222", "nats://10.0.0.3:6222"},
			[]netip.AddrPort{ap("10.0.0.2:6222"), ap("10.0.0.3:40000")}, nil},
		{"one machine: only the port tells", []string{"nats://127.0.0.1:7002", "nats://127.0.0.1:7003"},
			[]netip.AddrPort{ap("127.0.0.1:7003"), ap("127.0.0.1:50000")}, []string{"nats://127.0.0.1:7002"}},
		{"a name that does not resolve", []string{"nats://node2:6222", "nats://node9:6222"}, []netip.AddrPort{ap("10.0.0.2:6222")},
			[]string{"nats://node9:6222 (no such host)"}},
		{"an IPv4-mapped connection address", []string{"nats://node2:6222"}, []netip.AddrPort{ap("[::ffff:10.0.0.2]:6222")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unconnectedRoutes(context.Background(), tc.others, tc.conns, m)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("unconnectedRoutes (-want +got):\n%s", diff)
			}
		})
	}
}
