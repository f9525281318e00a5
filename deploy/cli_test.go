package deploy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentworld/agentworld/internal/cli"
	"github.com/agentworld/agentworld/internal/envconfig"
)

// hangGuard bounds what only a hang could make longer: a server starting,
// a probe answering.
const hangGuard = 2 * time.Minute

// checkNATSImage checks that a NATS server's image is the release
// agentworld embeds and is tested against (nats-server's VERSION, from
// go.mod): a deployment on another release meets behaviour no test here
// saw, such as when an append's acknowledgement comes relative to the
// subject's next append being accepted.
func checkNATSImage(t *testing.T, where, image string) {
	t.Helper()
	if want := "nats:" + server.VERSION; image != want && !strings.HasPrefix(image, want+"-") {
		t.Errorf("%s: image %q: want %s, the nats-server release in go.mod (or a variant of it such as %s-alpine)", where, image, want, want)
	}
}

// parseCommand parses a container's arguments (what follows the image's
// entrypoint, /agentworld) through agentworld's own command tree without
// running the command: the command must exist and be runnable, every flag
// must exist and take its value, the positional arguments must be what
// the command accepts, and the root's pre-run (log level, flag floors)
// must pass. A flag renamed or removed in the CLI fails here.
func parseCommand(args []string) (*cobra.Command, error) {
	root := cli.New()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return nil, err
	}
	if cmd == root || !cmd.Runnable() {
		return nil, fmt.Errorf("%q: %q is not a command that runs", strings.Join(args, " "), cmd.CommandPath())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	cmd.SetContext(context.Background())
	if err := root.PersistentPreRunE(cmd, cmd.Flags().Args()); err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	return cmd, nil
}

// flagValue is a parsed flag's value as text ("" when unset).
func flagValue(cmd *cobra.Command, name string) string {
	f := cmd.Flags().Lookup(name)
	if f == nil || !f.Changed {
		return ""
	}
	return f.Value.String()
}

// flagList is a parsed list flag's values.
func flagList(cmd *cobra.Command, name string) []string {
	f := cmd.Flags().Lookup(name)
	if f == nil || !f.Changed {
		return nil
	}
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		return sv.GetSlice()
	}
	return []string{f.Value.String()}
}

// envRead lists the environment variables cmd reads, as its help says
// (internal/cli's usesEnv annotation, the source of the "Environment
// variables" section of --help).
func envRead(cmd *cobra.Command) []string {
	return strings.Fields(cmd.Annotations["agentworld-env"])
}

// kubeVarRef is a Kubernetes $(VAR) reference in a container's arguments.
var kubeVarRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandKube expands args as Kubernetes does with the container's
// variables vals; a reference to no variable of the container is an
// error (Kubernetes would pass it on as written).
func expandKube(args []string, vals map[string]string) ([]string, error) {
	var errs []error
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = kubeVarRef.ReplaceAllStringFunc(a, func(ref string) string {
			name := kubeVarRef.FindStringSubmatch(ref)[1]
			v, ok := vals[name]
			if !ok {
				errs = append(errs, fmt.Errorf("argument %q: $(%s) is no variable of the container", a, name))
			}
			return v
		})
	}
	return out, errors.Join(errs...)
}

// checkEnv checks the variables a container sets for cmd: an
// agentworld variable must be in internal/envconfig's registry and read
// by cmd; any other must be used by the container's own arguments or
// configuration (used).
func checkEnv(cmd *cobra.Command, names []string, used map[string]bool) error {
	var errs []error
	reads := envRead(cmd)
	for _, name := range names {
		if _, ok := envconfig.Lookup(name); ok {
			if !slices.Contains(reads, name) {
				errs = append(errs, fmt.Errorf("%s is set, but %s does not read it (it reads %v)", name, cmd.CommandPath(), reads))
			}
			continue
		}
		if strings.HasPrefix(name, "AGENTWORLD_") {
			errs = append(errs, fmt.Errorf("%s is no variable agentworld reads (internal/envconfig)", name))
			continue
		}
		if !used[name] {
			errs = append(errs, fmt.Errorf("%s is set but used by nothing in the container", name))
		}
	}
	return errors.Join(errs...)
}

// hostPort splits a URL's host and port.
func hostPort(raw string) (host, port string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", err
	}
	if u.Port() == "" {
		return "", "", fmt.Errorf("%q names no port", raw)
	}
	return u.Hostname(), u.Port(), nil
}

// serveProbeDropped are serve's flags the probe check leaves out: they
// reach other machines (the model, NATS, peers) or say where this node
// keeps sessions, and none of them decides what /health answers.
var serveProbeDropped = []string{"addr", "db", "no-db", "cluster", "nats-listen", "nats-routes", "nats-store",
	"nats-replicas", "node", "advertise", "lease", "model", "replica", "api-key", "log-level"}

// serveProbe runs the real `agentworld serve` in this process with the
// container's parsed serve command's flags (less serveProbeDropped, on
// the container's --addr host with a free port, sessions in memory and a
// bearer token required), and answers a probe: GET path with the Host
// header a kubelet or a container engine sends (host), over loopback. It
// returns the status.
func serveProbe(t *testing.T, serve *cobra.Command, path, host string) int {
	t.Helper()
	listenHost, _, err := net.SplitHostPort(flagValue(serve, "addr"))
	if err != nil {
		t.Fatalf("serve --addr %q: %v", flagValue(serve, "addr"), err)
	}
	args := []string{"serve", "--addr", net.JoinHostPort(listenHost, "0"), "--no-db", "--api-key", "probe-needs-no-key", "--log-level", "warn"}
	serve.Flags().Visit(func(f *pflag.Flag) {
		if slices.Contains(serveProbeDropped, f.Name) {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+f.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := cli.New()
	pr, pw := io.Pipe()
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(pw)
	done := make(chan error, 1)
	go func() { // ends when ctx is cancelled (below) or serve fails
		err := root.ExecuteContext(ctx)
		pw.Close()
		done <- err
	}()
	// serve says where it listens on its error stream; the rest of the
	// stream is drained until serve ends.
	addrc := make(chan string, 1)
	read := make(chan struct{})
	go func() { // ends when serve closes pw
		defer close(read)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "serving on http://"); ok {
				addr, _, _ := strings.Cut(rest, " ")
				addrc <- addr
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	stop := func() error {
		cancel()
		<-read
		return <-done
	}
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		<-read
		t.Fatalf("agentworld %s: %v", strings.Join(args, " "), err)
	case <-time.After(hangGuard):
		t.Fatalf("agentworld %s: not serving after %v", strings.Join(args, " "), hangGuard)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("serve listens on %q: %v", addr, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+port+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", path, host, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err := stop(); err != nil {
		t.Errorf("agentworld %s: stopped with %v", strings.Join(args, " "), err)
	}
	return resp.StatusCode
}

// natsProbe starts the real nats-server in this process with conf (a
// NATS configuration file's text; its $VARIABLES from the environment
// the caller set), on loopback with free ports, its JetStream store in a
// temporary directory and no peer up, and returns the
// status each of paths of its monitoring port answers. A probe answered
// 503 (not ready yet) is asked again until hangGuard passes, as a
// kubelet or a container engine keeps asking.
func natsProbe(t *testing.T, conf string, paths ...string) map[string]int {
	t.Helper()
	opts := &server.Options{}
	if err := opts.ProcessConfigString(conf); err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	if opts.HTTPPort == 0 {
		t.Fatal("nats.conf: no monitoring port (http_port), which the probes ask")
	}
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.HTTPHost, opts.HTTPPort = "127.0.0.1", server.RANDOM_PORT
	opts.StoreDir = t.TempDir()
	if opts.Cluster.Port != 0 {
		// Its peers are not up: one route, to a loopback port nothing
		// listens on (a JetStream cluster will not start without one).
		opts.Cluster.Host, opts.Cluster.Port = "127.0.0.1", server.RANDOM_PORT
		opts.Routes, opts.RoutesStr = server.RoutesFromStr("nats://127.0.0.1:1"), ""
	}
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	s.Start()
	defer func() {
		s.Shutdown()
		s.WaitForShutdown()
	}()
	if !s.ReadyForConnections(hangGuard) {
		t.Fatalf("nats-server not ready after %v", hangGuard)
	}
	mon := s.MonitorAddr()
	if mon == nil {
		t.Fatal("nats-server: no monitoring listener")
	}
	client := &http.Client{Timeout: hangGuard}
	got := map[string]int{}
	for _, p := range paths {
		deadline := time.Now().Add(hangGuard)
		tick := time.NewTicker(100 * time.Millisecond)
		for {
			resp, err := client.Get("http://" + mon.String() + p)
			if err != nil {
				t.Fatalf("GET %s: %v", p, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got[p] = resp.StatusCode
			// 503 is a server not ready yet; any other answer is final.
			if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
				break
			}
			<-tick.C
		}
		tick.Stop()
	}
	return got
}

// TestParseCommandRefuses: the command-line check fails on what a
// renamed or removed flag, command or bad value would leave in a
// deployment file, so the files' tests can fail.
func TestParseCommandRefuses(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--no-such-flag"},
		{"serve", "--addr"},
		{"serve", "extra-argument"},
		{"bench", "wrker", "--queue=nats://nats:4222"},
		{"bench"},
		{"bench", "worker", "--concurrency=lots"},
		{"rollout", "worker", "--concurrency=0"},
		{"serve", "--log-level=loud"},
	} {
		if cmd, err := parseCommand(args); err == nil {
			t.Errorf("%q: accepted as %s", args, cmd.CommandPath())
		}
	}
	cmd, err := parseCommand([]string{"bench", "worker", "--queue=nats://nats:4222", "--concurrency=8"})
	if err != nil || cmd.CommandPath() != "agentworld bench worker" || flagValue(cmd, "queue") != "nats://nats:4222" {
		t.Fatalf("a good worker line: %v, %v", cmd, err)
	}
	if err := checkEnv(cmd, []string{"AGENTWORLD_POLICY_API_KEY"}, nil); err == nil {
		t.Error("bench worker does not read the policy key, yet setting it passed")
	}
	if err := checkEnv(cmd, []string{"AGENTWORLD_NO_SUCH_KEY"}, nil); err == nil {
		t.Error("an unregistered AGENTWORLD_ variable passed")
	}
	if err := checkEnv(cmd, []string{"AGENTWORLD_MODEL_API_KEY", "AGENTWORLD_JUDGE_API_KEY"}, nil); err != nil {
		t.Error(err)
	}
	if _, err := expandKube([]string{"--node=$(POD_NAME)"}, map[string]string{}); err == nil {
		t.Error("a $(VAR) the container does not define passed")
	}
}
