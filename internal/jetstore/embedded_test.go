package jetstore_test

import (
	"testing"

	"github.com/agentworld/agentworld/internal/jetstore"
)

// TestParseRoute: a route is a nats:// (or nats-route://) URL with a host
// and a port from 1 to 65535; a host that does not resolve is no error of
// its form.
func TestParseRoute(t *testing.T) {
	for _, tc := range []struct {
		route string
		ok    bool
	}{
		{"nats://127.0.0.1:6222", true},
		{"nats-route://node2:6222/", true},
		{"nats://127.0.0.l:6222", true},
		{"nats://[::1]:6222", true},
		{"127.0.0.1:6222", false},
		{"nats//127.0.0.1:6222", false},
		{"tls://node2:6222", false},
		{"http://node2:6222", false},
		{"nats://node2", false},
		{"nats://:6222", false},
		{"nats://node2:0", false},
		{"nats://node2:65536", false},
		{"nats://node2:port", false},
		{"", false},
	} {
		_, err := jetstore.ParseRoute(tc.route)
		if (err == nil) != tc.ok {
			t.Errorf("ParseRoute(%q) = %v, want ok %v", tc.route, err, tc.ok)
		}
	}
}
