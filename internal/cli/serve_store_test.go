package cli

import (
	"testing"

	"github.com/agentworld/agentworld/internal/app"
)

// TestStoreInUse: serve's startup log names the store it uses; a cluster
// node's is JetStream, never the --db file it does not open.
func TestStoreInUse(t *testing.T) {
	for _, c := range []struct {
		cfg  app.Config
		want string
	}{
		{app.Config{DBPath: "/d/sessions.db"}, "SQLite /d/sessions.db"},
		{app.Config{}, "memory"},
		{app.Config{DBPath: "/d/sessions.db", Cluster: &app.ClusterConfig{StoreDir: "/n"}}, "embedded JetStream in /n"},
		{app.Config{DBPath: "/d/sessions.db", Cluster: &app.ClusterConfig{URL: "nats://a:4222"}}, "JetStream at nats://a:4222"},
	} {
		if got := storeInUse(c.cfg); got != c.want {
			t.Errorf("storeInUse(%+v) = %q, want %q", c.cfg, got, c.want)
		}
	}
}
