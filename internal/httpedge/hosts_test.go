package httpedge

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestHostPolicy(t *testing.T) {
	p, err := newHostPolicy(Edge{AllowedHosts: []string{"Sim.Example.", "api.example:443"}, AllowedOrigins: []string{"https://UI.example/"}})
	if err != nil {
		t.Fatal(err)
	}
	p.listenOn(&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8080})
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8080": true, "LOCALHOST.": true, "app.localhost:3000": true,
		"127.0.0.1:80": true, "127.8.9.10": true, "[::1]:8080": true, "::1": true,
		"10.1.2.3:8080": true, "10.1.2.3:8081": false, "10.1.2.4:8080": false,
		"sim.example": true, "sim.example:1": true, "api.example:443": true, "api.example": false,
		"evil.example": false, "localhost.evil.example": false, "127.0.0.1.nip.io": false, "": false,
	} {
		if got := p.hostAllowed(host); got != want {
			t.Errorf("Host %q: allowed %v, want %v", host, got, want)
		}
	}
	any, _ := newHostPolicy(Edge{})
	any.listenOn(&net.TCPAddr{IP: net.IPv4zero, Port: 8080})
	for host, want := range map[string]bool{"192.168.1.5:8080": true, "[fe80::1]:8080": true, "box.lan:8080": false} {
		if got := any.hostAllowed(host); got != want {
			t.Errorf("listening on 0.0.0.0, Host %q: allowed %v, want %v", host, got, want)
		}
	}
	for _, tc := range []struct {
		origin, fetchSite, host string
		want                    bool
	}{
		{"", "", "localhost:8080", true},
		{"", "none", "localhost:8080", true},
		{"", "cross-site", "localhost:8080", false},
		{"http://localhost:8080", "", "localhost:8080", true},
		{"http://localhost:3000", "", "localhost:8080", false},
		{"https://ui.example", "", "localhost:8080", true},
		{"https://ui.example:444", "", "localhost:8080", false},
		{"http://ui.example", "", "localhost:8080", false},
		{"null", "", "localhost:8080", false},
	} {
		r, _ := http.NewRequest("POST", "http://"+tc.host+"/", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.fetchSite != "" {
			r.Header.Set("Sec-Fetch-Site", tc.fetchSite)
		}
		if got := p.originAllowed(r); got != tc.want {
			t.Errorf("Origin %q Sec-Fetch-Site %q for Host %s: allowed %v, want %v", tc.origin, tc.fetchSite, tc.host, got, tc.want)
		}
	}
	for _, e := range []Edge{{AllowedOrigins: []string{"ui.example"}}, {AllowedHosts: []string{"https://sim.example"}}, {AllowedHosts: []string{":8080"}}} {
		if err := e.Validate(); err == nil {
			t.Errorf("%+v validated", e)
		}
	}
}

// FuzzHostPolicy feeds arbitrary Host and Origin headers to the default
// policy: it never panics, admits a Host only when its name is a loopback
// name or address, and admits an Origin only when it is the request's own.
func FuzzHostPolicy(f *testing.F) {
	for _, s := range []string{"localhost:8080", "[::1]:1", "127.0.0.1", "evil.example", "localhost.evil", "[::1", "]:80", "xn--localhost-", "LOCALHOST.", "127.0.0.1.nip.io:80", "http://localhost:8080", "null", "%zz"} {
		f.Add(s, s)
	}
	p, _ := newHostPolicy(Edge{})
	f.Fuzz(func(t *testing.T, host, origin string) {
		if p.hostAllowed(host) {
			name, _ := splitHost(host)
			ip := net.ParseIP(name)
			if name != "localhost" && !strings.HasSuffix(name, ".localhost") && (ip == nil || !ip.IsLoopback()) {
				t.Fatalf("Host %q (name %q) admitted", host, name)
			}
		}
		r := &http.Request{Host: host, Header: http.Header{"Origin": {origin}}}
		if origin != "" && p.originAllowed(r) {
			n, err := normOrigin(origin)
			if err != nil || !strings.EqualFold(strings.SplitN(n, "://", 2)[1], host) {
				t.Fatalf("Origin %q admitted for Host %q", origin, host)
			}
		}
	})
}
