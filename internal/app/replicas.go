package app

import (
	"context"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// maxDefaultReplicas is the most servers that keep each stream and bucket
// unless Replicas says otherwise: three survive one server's loss, and
// more only slow every write.
const maxDefaultReplicas = 3

// defaultReplicas is how many servers keep each stream and bucket of an
// embedded server in a cluster of servers (this one and its otherRoutes,
// counted by checkCluster): one per server, up to maxDefaultReplicas.
func defaultReplicas(servers int) int { return min(maxDefaultReplicas, servers) }

// otherRoutes are the distinct routes of an embedded server that do not
// lead back to it, as given. The routes may name this node's own address
// (the docs ask for the same list on every node, and nats-server drops a
// route to itself once it connects and sees its own server ID), so
// counting route entries would ask two nodes for three replicas, which
// JetStream never places. A route leads back here when it has this
// server's port and its listen host, or, when it listens on every
// address, a loopback address, one of this machine's interface addresses,
// its host name, a name that resolves to one of those, or a name that
// does not resolve (yet) whose first label is its short host name.
func otherRoutes(ctx context.Context, listen string, routes []string, m machine) []string {
	lhost, lport, err := net.SplitHostPort(listen)
	if err != nil {
		lhost, lport = "", ""
	}
	self := selfAddrs{host: lhost, port: lport, m: m}
	// names are resolved only for routes on this server's port, and all
	// together within a short time: a route no one can resolve is
	// another node's (it cannot lead here), and startup should not wait
	// on DNS for long
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	seen := map[string]bool{}
	var others []string
	for _, r := range routes {
		host, port, ok := routeHostPort(r)
		if !ok {
			continue
		}
		k := net.JoinHostPort(host, port)
		if seen[k] {
			continue
		}
		seen[k] = true
		if !self.is(ctx, host, port) {
			others = append(others, strings.TrimSpace(r))
		}
	}
	return others
}

// resolveTimeout bounds the name lookups of otherRoutes (and of
// unconnectedRoutes) together.
const resolveTimeout = 2 * time.Second

// routeHostPort is a route URL's host (lower case; an IP address in its
// canonical form) and port; ok is false for an empty entry or one that is
// not a URL with a host (the embedded server refused those already).
func routeHostPort(route string) (host, port string, ok bool) {
	route = strings.TrimSpace(route)
	if route == "" {
		return "", "", false
	}
	u, err := url.Parse(route)
	if err != nil || u.Host == "" {
		return "", "", false
	}
	host, port = strings.ToLower(u.Hostname()), u.Port()
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return host, port, true
}

// machine is what this machine answers to: its interface addresses, its
// host name and a resolver, so that a route naming this node can be
// recognised. Tests give one of their own.
type machine struct {
	// IPs are the interface addresses.
	IPs []net.IP
	// Hostname is the machine's host name; "" when unknown.
	Hostname string
	// Lookup resolves a host name.
	Lookup func(ctx context.Context, host string) ([]net.IPAddr, error)
}

// thisMachine is the machine this process runs on.
func thisMachine() machine {
	m := machine{Lookup: net.DefaultResolver.LookupIPAddr}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ip, _, err := net.ParseCIDR(a.String()); err == nil {
				m.IPs = append(m.IPs, ip)
			}
		}
	}
	m.Hostname, _ = os.Hostname()
	return m
}

// selfAddrs recognises routes to this server: those on its port whose host
// is its listen host, or, when it listens on every address, any address
// of this machine or a name of it.
type selfAddrs struct {
	host, port string
	m          machine
}

// is reports whether host:port (as routeHostPort gives them) reaches this
// server.
func (s selfAddrs) is(ctx context.Context, host, port string) bool {
	if port == "" || port != s.port {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		return s.ownIP(ctx, ip)
	}
	short, _, _ := strings.Cut(s.m.Hostname, ".")
	if s.everyAddress() {
		if host == "localhost" || (s.m.Hostname != "" && (strings.EqualFold(host, s.m.Hostname) ||
			strings.EqualFold(host, short))) {
			return true
		}
	} else if strings.EqualFold(host, s.host) {
		return true
	}
	addrs, err := s.m.Lookup(ctx, host)
	if err != nil {
		// A name not published yet (a Kubernetes pod's own DNS record
		// appears only once it is ready, after startup) whose first label
		// is this machine's short name is this node: counted as another
		// server, two nodes would ask for three replicas and wait a
		// minute. Only an unresolved name is guessed at, since one that
		// resolves says where it leads (node1.dc2 is not node1.dc1); a
		// wrong guess leaves a replica fewer, not a store that never
		// opens.
		first, _, _ := strings.Cut(host, ".")
		return s.everyAddress() && short != "" && strings.EqualFold(first, short)
	}
	for _, a := range addrs {
		if s.ownIP(ctx, a.IP) {
			return true
		}
	}
	return false
}

// everyAddress reports whether the server listens on every address of the
// machine ("", 0.0.0.0 or ::).
func (s selfAddrs) everyAddress() bool {
	ip := net.ParseIP(s.host)
	return s.host == "" || (ip != nil && ip.IsUnspecified())
}

// ownIP reports whether a route to ip reaches this server: ip is its
// listen address, or it listens on every address and ip is one of this
// machine's (a loopback or unspecified address, or an interface's).
func (s selfAddrs) ownIP(ctx context.Context, ip net.IP) bool {
	if !s.everyAddress() {
		if lip := net.ParseIP(s.host); lip != nil {
			return lip.Equal(ip)
		}
		// a listen host name: whatever it resolves to
		addrs, err := s.m.Lookup(ctx, s.host)
		if err != nil {
			return false
		}
		for _, a := range addrs {
			if a.IP.Equal(ip) {
				return true
			}
		}
		return false
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	for _, own := range s.m.IPs {
		if own.Equal(ip) {
			return true
		}
	}
	return false
}
