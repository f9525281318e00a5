package httpedge

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// hostPolicy decides which Host and Origin headers are served.
type hostPolicy struct {
	mu sync.RWMutex
	// hosts maps a lower-case host name to the ports allowed with it ("" =
	// any port).
	hosts     map[string][]string
	anyHost   bool
	anyIP     bool // the server listens on every address: IP-literal Hosts are its own
	origins   map[string]bool
	anyOrigin bool
}

func newHostPolicy(e Edge) (*hostPolicy, error) {
	p := &hostPolicy{hosts: map[string][]string{}, origins: map[string]bool{}}
	for _, h := range e.AllowedHosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if h == "*" {
			p.anyHost = true
			continue
		}
		name, port := splitHost(h)
		if name == "" || strings.ContainsAny(h, "/@ ") {
			return nil, fmt.Errorf("allowed host %q: want a host name or name:port, no scheme or path", h)
		}
		p.hosts[name] = append(p.hosts[name], port)
	}
	for _, o := range e.AllowedOrigins {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if o == "*" {
			p.anyOrigin = true
			continue
		}
		n, err := normOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", o, err)
		}
		p.origins[n] = true
	}
	return p, nil
}

// listenOn adds the address the server listens on: its host with its
// port, or, for an unspecified address (0.0.0.0, [::]), every IP-literal
// Host: DNS rebinding needs a name, and a page at an IP literal of this
// server is this server.
func (p *hostPolicy) listenOn(addr net.Addr) {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ta.IP.IsUnspecified() {
		p.anyIP = true
		return
	}
	name := strings.ToLower(ta.IP.String())
	p.hosts[name] = append(p.hosts[name], fmt.Sprint(ta.Port))
}

// splitHost splits "name[:port]" (IPv6 in brackets) into a lower-case
// name without a trailing dot and the port ("" when none).
func splitHost(h string) (name, port string) {
	name = h
	if n, p, err := net.SplitHostPort(h); err == nil {
		name, port = n, p
	} else {
		name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	}
	return strings.TrimSuffix(strings.ToLower(name), "."), port
}

func normOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", err
	}
	if u.Scheme == "" || u.Host == "" {
		return "", errors.New("want scheme://host[:port]")
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// hostAllowed reports whether a request's Host header names this server.
func (p *hostPolicy) hostAllowed(host string) bool {
	if host == "" {
		return false
	}
	name, port := splitHost(host)
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true // RFC 6761: browsers resolve these to loopback only
	}
	ip := net.ParseIP(name)
	if ip != nil && ip.IsLoopback() {
		return true
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.anyHost || (ip != nil && p.anyIP) {
		return true
	}
	for _, want := range p.hosts[name] {
		if want == "" || want == port {
			return true
		}
	}
	return false
}

// originAllowed reports whether a browser request may proceed: no Origin
// (a non-browser client, or a same-origin navigation), the server's own
// origin, or an allowed one. A request without Origin that the browser
// marks cross-site is refused too.
func (p *hostPolicy) originAllowed(r *http.Request) bool {
	o := headerValue(r.Header, "Origin")
	if o == "" {
		return headerValue(r.Header, "Sec-Fetch-Site") != "cross-site" || p.anyOrigin
	}
	if p.anyOrigin {
		return true
	}
	n, err := normOrigin(o)
	if err != nil {
		return false // "null" (sandboxed frames, file: pages) and junk
	}
	if u, _ := url.Parse(n); u != nil && strings.EqualFold(u.Host, r.Host) {
		return true
	}
	return p.origins[n]
}
