package app

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
)

// unconnectedRoutes are the routes among others (an embedded server's
// routes to other servers: otherRoutes) that no route connection of its
// conns (their remote addresses) is seen to reach, each with the reason
// when its name does not resolve. nats-server keeps one connection (or
// pool) per remote server, made by either side, and does not say which
// configured route it belongs to, so a route counts as connected when a
// connection's address is its address and port (this server dialled it),
// or only its address when no other route resolves to that address (the
// other server dialled this one, from a port of its own). Two nodes on one
// machine whose connections the other side made are then both reported
// unconnected: the report is for a cluster that is not complete, where
// a route too many is better than a route missed.
func unconnectedRoutes(ctx context.Context, others []string, conns []netip.AddrPort, m machine) []string {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	type route struct {
		entry string
		ips   []netip.Addr
		port  uint16
		err   error
	}
	var rs []route
	users := map[netip.Addr]int{} // routes resolving to each address
	for _, r := range others {
		host, port, ok := routeHostPort(r)
		if !ok {
			continue
		}
		rt := route{entry: r}
		if p, err := strconv.ParseUint(port, 10, 16); err == nil {
			rt.port = uint16(p)
		}
		if ip, err := netip.ParseAddr(host); err == nil {
			rt.ips = []netip.Addr{ip}
		} else if addrs, err := m.Lookup(ctx, host); err != nil {
			rt.err = err
		} else {
			for _, a := range addrs {
				if ip, ok := netip.AddrFromSlice(a.IP); ok && !slices.Contains(rt.ips, ip.Unmap()) {
					rt.ips = append(rt.ips, ip.Unmap())
				}
			}
		}
		for _, ip := range rt.ips {
			users[ip]++
		}
		rs = append(rs, rt)
	}
	var out []string
	for _, rt := range rs {
		if rt.err != nil {
			out = append(out, fmt.Sprintf("%s (%v)", rt.entry, rt.err))
			continue
		}
		if !slices.ContainsFunc(conns, func(c netip.AddrPort) bool {
			ip := c.Addr().Unmap()
			return slices.Contains(rt.ips, ip) && (c.Port() == rt.port || users[ip] == 1)
		}) {
			out = append(out, rt.entry)
		}
	}
	return out
}
