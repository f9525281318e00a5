package deploy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/cli"
	"github.com/agentworld/agentworld/internal/envconfig"
)

// composeFile is the compose file, beside this test.
const composeFile = "compose.yaml"

// loadCompose loads content (a compose file's text; composeFile's when
// empty) with Docker Compose's own loader: the compose-spec JSON schema
// (unknown fields refused), interpolation of env, normalization and the
// consistency checks `docker compose config` runs.
func loadCompose(t *testing.T, content string, env map[string]string) (*types.Project, error) {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	cf := types.ConfigFile{Filename: filepath.Join(dir, composeFile)}
	if content != "" {
		cf.Content = []byte(content)
	}
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{cf},
		Environment: env,
	}, func(o *loader.Options) { o.SetProjectName("agentworld", true) })
}

// TestComposeLoaderIsStrict: the loader as called here refuses a field
// the compose spec does not have, and a service depending on one that
// is not there, so the compose file's test can fail.
func TestComposeLoaderIsStrict(t *testing.T) {
	for _, bad := range []string{
		"services:\n  a:\n    image: x\n    comand: [serve]\n",
		"services:\n  a:\n    image: x\n    depends_on: [b]\n",
		"services:\n  a:\n    image: x\n    healthcheck: {test: [CMD, x], interval: often}\n",
	} {
		if _, err := loadCompose(t, bad, nil); err == nil {
			t.Errorf("loaded:\n%s", bad)
		}
	}
}

// composeKeys are the keys the compose file passes from the environment
// of `docker compose` into its containers.
var composeKeys = []string{"AGENTWORLD_API_KEY", "AGENTWORLD_MODEL_API_KEY", "AGENTWORLD_JUDGE_API_KEY", "AGENTWORLD_POLICY_API_KEY"}

// TestComposeKeysFromTheEnvironment: every key a service gets is the
// value of the same variable where `docker compose` runs, never one
// written in the file; unset there, it is unset in the container.
func TestComposeKeysFromTheEnvironment(t *testing.T) {
	env := map[string]string{}
	for _, k := range composeKeys {
		env[k] = "from-the-environment-" + k
	}
	set, err := loadCompose(t, "", env)
	if err != nil {
		t.Fatal(err)
	}
	unset, err := loadCompose(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range sorted(keys(set.Services)) {
		for k, v := range set.Services[name].Environment {
			ev, ok := envconfig.Lookup(k)
			if !ok || !ev.Secret {
				continue
			}
			if v == nil || *v != env[k] {
				t.Errorf("service %s: %s is %v with %s=%q in the environment: a key must come from there", name, k, deref(v), k, env[k])
			}
			if u := unset.Services[name].Environment[k]; u != nil {
				t.Errorf("service %s: %s is %q with it unset in the environment: want it unset", name, k, *u)
			}
		}
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// composeService is a service running the agentworld image, its command
// parsed by agentworld's command tree.
type composeService struct {
	name string
	svc  types.ServiceConfig
	cmd  *cobra.Command
}

// TestCompose: compose.yaml is what it means: three agentworld nodes
// clustering their embedded NATS servers with one another, each
// advertising its own service name and port, serving the others' names,
// its store on its own volume, and published on its own host port; a
// NATS server for the work queues with a durable JetStream, a health
// check that a real nats-server with that configuration passes, and its
// client port published; bench and rollout workers on that queue,
// started once it is healthy. Every agentworld command line is accepted
// by agentworld's own CLI and reads every key it is given.
func TestCompose(t *testing.T) {
	p, err := loadCompose(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bench-worker", "nats", "node1", "node2", "node3", "rollout-worker"}
	if diff := cmp.Diff(want, sorted(keys(p.Services))); diff != "" {
		t.Fatalf("services (-want +got):\n%s", diff)
	}
	entry := dockerfileEntrypoint(t)

	// Every agentworld service: its image is the Dockerfile's, and its
	// command is agentworld's arguments.
	byCmd := map[string][]composeService{}
	for _, name := range sorted(keys(p.Services)) {
		svc := p.Services[name]
		if !strings.HasPrefix(svc.Image, "agentworld:") {
			continue
		}
		if svc.Build == nil || svc.Build.Dockerfile != "deploy/Dockerfile" || filepath.Clean(svc.Build.Context) != filepath.Dir(p.WorkingDir) {
			t.Errorf("service %s: build %+v: want the repository with deploy/Dockerfile", name, svc.Build)
		}
		if len(svc.Entrypoint) > 0 || !slices.Equal(entry, []string{"/agentworld"}) {
			t.Errorf("service %s: entrypoint %q, the Dockerfile's %q: want /agentworld", name, svc.Entrypoint, entry)
		}
		cmd, err := parseCommand(svc.Command)
		if err != nil {
			t.Errorf("service %s: agentworld refuses its command: %v", name, err)
			continue
		}
		if err := checkEnv(cmd, keys(svc.Environment), nil); err != nil {
			t.Errorf("service %s: %v", name, err)
		}
		byCmd[cmd.CommandPath()] = append(byCmd[cmd.CommandPath()], composeService{name, svc, cmd})
	}

	nodes := byCmd["agentworld serve"]
	var names []string
	for _, n := range nodes {
		names = append(names, n.name)
	}
	if len(nodes) != 3 {
		t.Fatalf("serve runs in %v: want three nodes", names)
	}
	published := map[string]string{}
	for _, n := range nodes {
		// Compose sends SIGTERM, then SIGKILL after stop_grace_period (10 s
		// unless set): a node killed before its shutdown ends keeps its
		// lease, so its sessions wait out the lease instead of moving.
		if g := n.svc.StopGracePeriod; g == nil || time.Duration(*g) < cli.ServeStopBound {
			t.Errorf("service %s: stop_grace_period %v: want at least serve's shutdown bound %v", n.name, g, cli.ServeStopBound)
		}
		checkComposeNode(t, p, n, names, published)
	}

	nats := p.Services["nats"]
	conf := checkComposeNATS(t, p, nats)
	for _, worker := range []string{"agentworld bench worker", "agentworld rollout worker"} {
		ws := byCmd[worker]
		if len(ws) != 1 {
			t.Errorf("%d services run %s, want 1", len(ws), worker)
		}
		for _, w := range ws {
			for _, q := range strings.Split(flagValue(w.cmd, "queue"), ",") {
				host, port, err := hostPort(q)
				if err != nil || host != "nats" || port != fmt.Sprint(conf.Port) {
					t.Errorf("service %s: --queue %s: want the nats service's client port %d (%v)", w.name, q, conf.Port, err)
				}
			}
			if d, ok := w.svc.DependsOn["nats"]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("service %s: depends_on %v: want nats, healthy", w.name, w.svc.DependsOn)
			}
		}
	}
}

// checkComposeNode checks an agentworld node of the embedded cluster;
// names are all nodes' service names, published the host ports taken so
// far.
func checkComposeNode(t *testing.T, p *types.Project, n composeService, names []string, published map[string]string) {
	t.Helper()
	cmd := n.cmd
	if flagValue(cmd, "node") != n.name {
		t.Errorf("service %s: --node %q: want its service name", n.name, flagValue(cmd, "node"))
	}
	_, addrPort, err := net.SplitHostPort(flagValue(cmd, "addr"))
	if err != nil {
		t.Fatalf("service %s: --addr: %v", n.name, err)
	}
	if host, port, err := hostPort(flagValue(cmd, "advertise")); err != nil || host != n.name || port != addrPort {
		t.Errorf("service %s: --advertise %q: want http://%s:%s (%v)", n.name, flagValue(cmd, "advertise"), n.name, addrPort, err)
	}
	// Forwarded requests keep the client's Host, so every node serves
	// every node's name.
	for _, other := range names {
		if !slices.Contains(flagList(cmd, "allowed-hosts"), other) {
			t.Errorf("service %s: --allowed-hosts %v lacks %s", n.name, flagList(cmd, "allowed-hosts"), other)
		}
	}
	_, routePort, err := net.SplitHostPort(flagValue(cmd, "nats-listen"))
	if err != nil {
		t.Fatalf("service %s: --nats-listen: %v", n.name, err)
	}
	var routes, want []string
	for _, r := range flagList(cmd, "nats-routes") {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "nats" {
			t.Errorf("service %s: route %q: %v", n.name, r, err)
			continue
		}
		routes = append(routes, u.Host)
	}
	for _, other := range names {
		want = append(want, net.JoinHostPort(other, routePort))
	}
	if diff := cmp.Diff(sorted(want), sorted(routes)); diff != "" {
		t.Errorf("service %s: --nats-routes are not every node's --nats-listen (-want +got):\n%s", n.name, diff)
	}
	if store := flagValue(cmd, "nats-store"); !onNamedVolume(p, n.svc, store) {
		t.Errorf("service %s: --nats-store %q is on no named volume of the service", n.name, store)
	}
	if len(n.svc.Ports) != 1 || fmt.Sprint(n.svc.Ports[0].Target) != addrPort || n.svc.Ports[0].Published == "" {
		t.Errorf("service %s: ports %+v: want one, published, to --addr's port %s", n.name, n.svc.Ports, addrPort)
	} else if other, dup := published[n.svc.Ports[0].Published]; dup {
		t.Errorf("services %s and %s publish the same host port %s", other, n.name, n.svc.Ports[0].Published)
	} else {
		published[n.svc.Ports[0].Published] = n.name
		// What a client on the host reaches: localhost:PUBLISHED.
		if code := serveProbe(t, cmd, "/health", "localhost:"+n.svc.Ports[0].Published); code != http.StatusOK {
			t.Errorf("service %s: GET /health from the host: %d from a real serve with its flags, want 200", n.name, code)
		}
	}
	// A client in another container names the node.
	if code := serveProbe(t, cmd, "/health", net.JoinHostPort(names[0], addrPort)); code != http.StatusOK {
		t.Errorf("service %s: GET /health as http://%s:%s: %d from a real serve with its flags, want 200", n.name, names[0], addrPort, code)
	}
}

// onNamedVolume reports whether dir is under a mount of a named volume
// the project declares.
func onNamedVolume(p *types.Project, svc types.ServiceConfig, dir string) bool {
	for _, v := range svc.Volumes {
		if v.Type != types.VolumeTypeVolume || !strings.HasPrefix(dir+"/", strings.TrimSuffix(v.Target, "/")+"/") {
			continue
		}
		if _, ok := p.Volumes[v.Source]; ok {
			return true
		}
	}
	return false
}

// checkComposeNATS checks the work queue's NATS server and returns its
// configuration: the file mounted where its -c reads, durable, its
// store on a named volume, its client port published, and a health
// check that a real nats-server running it passes.
func checkComposeNATS(t *testing.T, p *types.Project, nats types.ServiceConfig) *server.Options {
	t.Helper()
	checkNATSImage(t, "service nats", nats.Image)
	if len(nats.Command) != 2 || (nats.Command[0] != "-c" && nats.Command[0] != "--config") {
		t.Fatalf("service nats: command %q: want -c CONFIG", nats.Command)
	}
	var conf []byte
	for _, v := range nats.Volumes {
		if v.Type == types.VolumeTypeBind && v.Target == nats.Command[1] {
			if !v.ReadOnly {
				t.Errorf("service nats: %s is mounted writable", v.Target)
			}
			var err error
			if conf, err = os.ReadFile(v.Source); err != nil {
				t.Fatalf("service nats: %v", err)
			}
			if rel, _ := filepath.Rel(p.WorkingDir, v.Source); rel != "nats.conf" {
				t.Errorf("service nats: mounts %s, want deploy/nats.conf", v.Source)
			}
		}
	}
	if conf == nil {
		t.Fatalf("service nats: no file is mounted at %s", nats.Command[1])
	}
	opts := &server.Options{}
	if err := opts.ProcessConfigString(string(conf)); err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	checkDurableJetStream(t, opts)
	if !onNamedVolume(p, nats, opts.StoreDir) {
		t.Errorf("nats.conf: store_dir %s is on no named volume of service nats", opts.StoreDir)
	}
	if !slices.ContainsFunc(nats.Ports, func(pc types.ServicePortConfig) bool { return int(pc.Target) == opts.Port && pc.Published != "" }) {
		t.Errorf("service nats: ports %+v: the client port %d is not published for coordinators on the host", nats.Ports, opts.Port)
	}
	hc := nats.HealthCheck
	if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" {
		t.Fatalf("service nats: healthcheck %+v: want a CMD test", hc)
	}
	probe := healthcheckURL.FindString(strings.Join(hc.Test[1:], " "))
	u, err := url.Parse(probe)
	if err != nil || probe == "" {
		t.Fatalf("service nats: healthcheck %q names no URL", hc.Test)
	}
	if u.Hostname() != "localhost" || u.Port() != fmt.Sprint(opts.HTTPPort) {
		t.Errorf("service nats: healthcheck asks %s, the monitoring port is localhost:%d", u.Host, opts.HTTPPort)
	}
	paths := path.Clean(u.Path)
	if u.RawQuery != "" {
		paths += "?" + u.RawQuery
	}
	for p, code := range natsProbe(t, string(conf), paths) {
		if code != http.StatusOK {
			t.Errorf("service nats: healthcheck GET %s: %d from a real nats-server with nats.conf, want 200", p, code)
		}
	}
	return opts
}

// healthcheckURL finds the URL a healthcheck command asks.
var healthcheckURL = regexp.MustCompile(`https?://\S+`)

// dockerfileEntrypoint is the final stage's ENTRYPOINT of the
// Dockerfile, which must build with the Go release go.mod names.
func dockerfileEntrypoint(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goVersion == nil || !strings.Contains(string(data), "FROM golang:"+string(goVersion[1])+" ") {
		t.Errorf("Dockerfile: the build stage is not golang:%s, go.mod's Go", goVersion[1])
	}
	var entry []string
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "ENTRYPOINT "); ok {
			entry = nil
			for _, f := range strings.Split(strings.Trim(rest, "[] "), ",") {
				entry = append(entry, strings.Trim(strings.TrimSpace(f), `"`))
			}
		}
	}
	return entry
}
