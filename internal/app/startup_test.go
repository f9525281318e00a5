package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/testkit"
)

// countingModel is a model server that lists models and counts tokens.
func countingModel(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"data":[{"id":"wm"}]}`)
		case "/tokenize":
			fmt.Fprint(w, `{"count":1,"max_model_len":4096,"tokens":[1]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fullConfig opens every resource New can open: a routed model, a token
// count from the server, a transition cache and a session database.
func fullConfig(t *testing.T, modelURL string) Config {
	dir := t.TempDir()
	return Config{Model: modelURL + "/v1", ModelName: "wm", CountTokens: "server",
		CacheDir: filepath.Join(dir, "cache"), DBPath: filepath.Join(dir, "sessions.db")}
}

// TestStartupFailureClosesWhatWasOpened fails New after each of its steps
// in turn: every failure leaves no goroutine (router health loop, store
// writer, session reaper, MCP) and no open file (database, cache) behind,
// and the database's single-owner lock is free again.
func TestStartupFailureClosesWhatWasOpened(t *testing.T) {
	model := countingModel(t)
	cfg := fullConfig(t, model.URL)
	ctx := context.Background()
	var steps []string
	testHookStep = func(s string) error { steps = append(steps, s); return nil }
	t.Cleanup(func() { testHookStep = nil })
	a, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"worlds", "router", "tokens", "cache", "store", "manager", "mcp"}, steps); diff != "" {
		t.Fatalf("startup steps (-want +got):\n%s", diff)
	}
	injected := errors.New("injected failure")
	for _, failAt := range steps {
		t.Run(failAt, func(t *testing.T) {
			model.CloseClientConnections()
			leaks := testkit.Leaks(t)
			testHookStep = func(s string) error {
				if s == failAt {
					return injected
				}
				return nil
			}
			a, err := New(ctx, cfg)
			if !errors.Is(err, injected) || a != nil {
				t.Fatalf("New = %v, %v; want the injected failure", a, err)
			}
			model.CloseClientConnections()
			leaks.Check(0)
			db, err := store.Open(cfg.DBPath)
			if err != nil {
				t.Fatalf("the database is still held after a failed start: %v", err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStartupStopsWithItsContext: a model server that never answers the
// token count does not hold startup once its context ends (Ctrl-C), and
// what was opened before is closed.
func TestStartupStopsWithItsContext(t *testing.T) {
	// The context ends once startup waits on the count (not after a fixed
	// time, which a loaded machine could spend before startup gets there).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelled := make(chan time.Time, 1)
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"data":[{"id":"wm"}]}`)
		case "/tokenize":
			// The server sees the client go only once the body is read.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case cancelled <- time.Now():
				cancel()
			default:
			}
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(model.Close)
	cfg := fullConfig(t, model.URL)
	leaks := testkit.Leaks(t)
	a, err := New(ctx, cfg)
	if !errors.Is(err, context.Canceled) || a != nil {
		t.Fatalf("New = %v, %v; want context.Canceled", a, err)
	}
	// Startup bounds the question by 10 s of its own: it must stop well
	// before that, with its context (the bound is measured from the
	// cancel, so startup's own work on a loaded machine does not count).
	select {
	case at := <-cancelled:
		if d := time.Since(at); d > 8*time.Second {
			t.Errorf("New returned %s after its context ended", d)
		}
	default:
		t.Fatal("startup never asked the server to count tokens")
	}
	model.CloseClientConnections()
	leaks.Check(0)
}

// TestConfigErrorsNameTheirField: configuration errors are fielderr
// errors of kind ErrConfig naming the Config field, which the CLI maps to
// a flag.
func TestConfigErrorsNameTheirField(t *testing.T) {
	ctx := context.Background()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	listen := freeAddr(t)
	cluster := func(listen string, routes ...string) Config {
		return Config{Cluster: &ClusterConfig{StoreDir: t.TempDir(), Listen: listen, Routes: routes, Node: "n", Addr: "http://127.0.0.1:8080"}}
	}
	replicas := func(c Config, n int) Config { c.Cluster.Replicas = n; return c }
	// a store directory JetStream cannot create: one under a file
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	badStore := func(c Config) Config { c.Cluster.StoreDir = filepath.Join(file, "nats"); return c }
	for _, tc := range []struct {
		field string
		cfg   Config
		msg   string // in the error's text; "" for any
	}{
		{"WorldsDir", Config{WorldsDir: filepath.Join(t.TempDir(), "missing")}, ""},
		{"Model", Config{Model: "replay:" + filepath.Join(t.TempDir(), "missing")}, ""},
		{"ModelName", Config{Model: "http://127.0.0.1:1/v1"}, ""},
		{"CacheDir", Config{CacheDir: t.TempDir()}, ""},
		{"CountTokens", Config{Model: "http://127.0.0.1:1/v1", ModelName: "wm", CountTokens: "guess"}, ""},
		{"AllowExtraBody", Config{AllowExtraBody: []string{"top_k", "messages"}}, ""},
		{"SuccessJudge", Config{WorldsDir: judgedWorldsDir(t)}, ""},
		// a route listen address, and no route to another server
		{"Cluster.Routes", Config{Cluster: &ClusterConfig{StoreDir: t.TempDir(), Listen: listen,
			Routes: []string{"nats://" + listen}, Node: "n", Addr: "http://127.0.0.1:8080"}}, ""},
		{"Cluster.Routes", Config{Cluster: &ClusterConfig{StoreDir: t.TempDir(), Listen: listen, Node: "n", Addr: "http://127.0.0.1:8080"}}, ""},
		// routes nats-server cannot use (it crashed on the first), a route
		// listen address that cannot be listened on, more replicas than
		// servers (the cluster's or JetStream's most)
		{"Cluster.Routes", cluster(listen, "127.0.0.1:7002"), `route "127.0.0.1:7002"`},
		{"Cluster.Routes", cluster(listen, "nats//127.0.0.1:7002"), `route "nats//127.0.0.1:7002"`},
		{"Cluster.Routes", cluster(listen, "http://127.0.0.1:7002"), "scheme"},
		{"Cluster.Routes", cluster(listen, "nats://127.0.0.1"), "port"},
		{"Cluster.Routes", cluster(listen, "nats://:7002"), "no host"},
		{"Cluster.Routes", cluster(listen, "nats://127.0.0.1:7002", "nats://127.0.0.1:99999"), `route "nats://127.0.0.1:99999"`},
		{"Cluster.Routes", Config{Cluster: &ClusterConfig{StoreDir: t.TempDir(), Routes: []string{"nats://127.0.0.1:7002"}, Node: "n", Addr: "http://127.0.0.1:8080"}}, "listen address"},
		{"Cluster.Listen", cluster("127.0.0.1:99999", "nats://127.0.0.1:7002"), "1 to 65535"},
		{"Cluster.Listen", cluster("127.0.0.1:0", "nats://127.0.0.1:7002"), "1 to 65535"},
		{"Cluster.Listen", cluster("127.0.0.1", "nats://127.0.0.1:7002"), ""},
		{"Cluster.Listen", cluster(busy.Addr().String(), "nats://127.0.0.1:7002"), "address already in use"},
		// a store the embedded server cannot open is no fault of the
		// route listen address, which a single node does not even have
		{"Cluster.StoreDir", badStore(Config{Cluster: &ClusterConfig{Node: "n", Addr: "http://127.0.0.1:8080"}}), "JetStream"},
		{"Cluster.StoreDir", badStore(cluster(listen, "nats://127.0.0.1:7002")), "JetStream"},
		{"Cluster.Replicas", replicas(cluster(listen, "nats://127.0.0.1:7002", "nats://127.0.0.1:7003", "nats://"+listen), 4), "4 replicas, but the cluster has 3 servers"},
		{"Cluster.Replicas", replicas(cluster(listen, "nats://127.0.0.1:7002", "nats://127.0.0.1:7003", "nats://127.0.0.1:7004",
			"nats://127.0.0.1:7005", "nats://127.0.0.1:7006"), 6), "6 replicas, but JetStream keeps at most 5"},
		{"Cluster.Replicas", replicas(Config{Cluster: &ClusterConfig{StoreDir: t.TempDir(), Node: "n", Addr: "http://127.0.0.1:8080"}}, 2), "2 replicas, but the cluster has 1 server "},
		{"Cluster.Replicas", replicas(Config{Cluster: &ClusterConfig{URL: "nats://127.0.0.1:1", Node: "n", Addr: "http://127.0.0.1:8080"}}, 6), "at most 5"},
		{"Cluster.Replicas", replicas(cluster(listen, "nats://127.0.0.1:7002"), -1), "-1 replicas"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, err := New(ctx, tc.cfg)
			wantConfigField(t, err, tc.field)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q, want one saying %q", err, tc.msg)
			}
		})
	}
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestCheckClusterAccepts: the cluster configurations checkCluster lets
// through, with the servers it counts: routes in either scheme
// nats-server reads, a route whose name does not resolve yet (a
// Kubernetes pod not yet published), and replicas up to the servers.
func TestCheckClusterAccepts(t *testing.T) {
	listen := freeAddr(t)
	for _, tc := range []struct {
		name    string
		c       ClusterConfig
		servers int
	}{
		{"nats and nats-route routes, its own among them", ClusterConfig{Listen: listen,
			Routes: []string{"nats://" + listen, " nats-route://127.0.0.1:7002/", "nats://127.0.0.1:7003"}}, 3},
		{"a name that does not resolve", ClusterConfig{Listen: listen, Routes: []string{"nats://127.0.0.l:7002"}}, 2},
		{"replicas as many as servers", ClusterConfig{Listen: listen, Routes: []string{"nats://127.0.0.1:7002"}, Replicas: 2}, 2},
		{"a single node", ClusterConfig{Replicas: 1}, 1},
		{"an existing cluster", ClusterConfig{URL: "nats://127.0.0.1:1", Replicas: 5}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Node, tc.c.Addr = "n", "http://127.0.0.1:8080"
			if tc.c.URL == "" {
				tc.c.StoreDir = t.TempDir()
			}
			plan, err := checkCluster(context.Background(), &tc.c)
			if err != nil || plan.servers != tc.servers {
				t.Fatalf("checkCluster = %d servers, %v; want %d, nil", plan.servers, err, tc.servers)
			}
		})
	}
}

// judgedWorldsDir holds a world whose success a model judges, which needs
// Config.SuccessJudge.
func judgedWorldsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	spec := "domain: terminal\ntask_description: t\naction_space: keys\nreward: {success: {judge: {criterion: done}}}\n"
	if err := os.WriteFile(filepath.Join(dir, "judged.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
