package cli

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeClusterFlagErrors: a cluster flag serve cannot work with fails
// at once (before any server starts), naming the flag and the value it
// refuses.
func TestServeClusterFlagErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	_ = free.Close() // a free port for this node's routes
	own := fmt.Sprintf("127.0.0.1:%d", port)
	store := filepath.Join(t.TempDir(), "nats")
	// a store directory JetStream cannot create: one under a file
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	badStore := filepath.Join(file, "nats")
	listen := func(addr string, args ...string) []string {
		return append([]string{"--addr", "127.0.0.1:0", "--advertise", "http://127.0.0.1:18089", "--nats-listen", addr, "--nats-store", store}, args...)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"a route without a scheme", listen(own, "--nats-routes", "127.0.0.1:16221"),
			[]string{"--nats-routes: ", `"127.0.0.1:16221"`, "nats://HOST:PORT"}},
		{"a route missing its colon", listen(own, "--nats-routes", "nats//127.0.0.1:16221"),
			[]string{"--nats-routes: ", `"nats//127.0.0.1:16221"`}},
		{"a route port out of range", listen(own, "--nats-routes", "nats://127.0.0.1:16221,nats://127.0.0.1:99999"),
			[]string{"--nats-routes: ", `"nats://127.0.0.1:99999"`, "1 to 65535"}},
		{"a listen port out of range", listen("127.0.0.1:99999", "--nats-routes", "nats://127.0.0.1:16221"),
			[]string{"--nats-listen: ", "127.0.0.1:99999", "1 to 65535"}},
		{"a listen port in use", listen(busy.Addr().String(), "--nats-routes", "nats://127.0.0.1:16221"),
			[]string{"--nats-listen: ", busy.Addr().String(), "in use"}},
		{"a store that cannot be created, a single node", []string{"--addr", "127.0.0.1:0", "--advertise", "http://127.0.0.1:18089", "--nats-store", badStore},
			[]string{"--nats-store: ", "JetStream"}},
		{"a store that cannot be created, with a listen address", listen(own, "--nats-routes", "nats://127.0.0.1:16221", "--nats-store", badStore),
			[]string{"--nats-store: ", "JetStream"}},
		{"more replicas than servers", listen(own, "--nats-routes", "nats://127.0.0.1:1,nats://127.0.0.1:2,nats://"+own, "--nats-replicas", "5"),
			[]string{"--nats-replicas: ", "5 replicas", "3 servers"}},
		{"more replicas than JetStream keeps", []string{"--cluster", "nats://127.0.0.1:1", "--addr", "127.0.0.1:0", "--advertise", "http://127.0.0.1:18089", "--nats-replicas", "7"},
			[]string{"--nats-replicas: ", "7 replicas", "at most 5"}},
		{"--addr in use", []string{"--addr", busy.Addr().String()},
			[]string{"--addr: ", busy.Addr().String(), "in use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"serve", "--no-db"}, tc.args...)...)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("serve %v: error %v, want one saying %s", tc.args, err, w)
				}
			}
		})
	}
}
