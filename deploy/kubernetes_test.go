package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/agentworld/agentworld/internal/cli"
	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/jetstore"
)

// kubeDir holds the Kubernetes manifests and their kustomization.
const kubeDir = "kubernetes"

// keysSecret is the Secret every API key comes from.
const keysSecret = "agentworld-keys"

// manifests are the objects of kubeDir's files, by name.
type manifests struct {
	configMaps   map[string]*corev1.ConfigMap
	services     map[string]*corev1.Service
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	// ids are "Kind/name" of every object, in file order.
	ids []string
}

// apiVersions are the kinds the manifests may hold and their API
// versions.
var apiVersions = map[string]string{
	"ConfigMap": "v1", "Service": "v1", "Deployment": "apps/v1", "StatefulSet": "apps/v1",
}

// splitDocuments splits a YAML stream into its documents.
func splitDocuments(data []byte) ([][]byte, error) {
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}

// decodeStrict decodes one document into the typed object of its kind,
// refusing unknown and duplicate fields.
func (m *manifests) decodeStrict(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	want, ok := apiVersions[tm.Kind]
	if !ok {
		return fmt.Errorf("kind %q: not one these manifests are checked for", tm.Kind)
	}
	if tm.APIVersion != want {
		return fmt.Errorf("%s: apiVersion %q, want %q", tm.Kind, tm.APIVersion, want)
	}
	var (
		meta *metav1.ObjectMeta
		err  error
	)
	switch tm.Kind {
	case "ConfigMap":
		o := new(corev1.ConfigMap)
		err, meta = yaml.UnmarshalStrict(doc, o), &o.ObjectMeta
		m.configMaps[o.Name] = o
	case "Service":
		o := new(corev1.Service)
		err, meta = yaml.UnmarshalStrict(doc, o), &o.ObjectMeta
		m.services[o.Name] = o
	case "Deployment":
		o := new(appsv1.Deployment)
		err, meta = yaml.UnmarshalStrict(doc, o), &o.ObjectMeta
		m.deployments[o.Name] = o
	case "StatefulSet":
		o := new(appsv1.StatefulSet)
		err, meta = yaml.UnmarshalStrict(doc, o), &o.ObjectMeta
		m.statefulSets[o.Name] = o
	}
	if err != nil {
		return fmt.Errorf("%s: %w", tm.Kind, err)
	}
	if errs := validation.IsDNS1123Label(meta.Name); len(errs) > 0 {
		return fmt.Errorf("%s %q: %s", tm.Kind, meta.Name, strings.Join(errs, "; "))
	}
	id := tm.Kind + "/" + meta.Name
	if slices.Contains(m.ids, id) {
		return fmt.Errorf("%s twice", id)
	}
	m.ids = append(m.ids, id)
	return nil
}

// loadManifests decodes every document of kubeDir's YAML files but the
// kustomization strictly, and builds the kustomization with kustomize
// (what `kubectl apply -k` runs): it must yield exactly those objects.
func loadManifests(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{configMaps: map[string]*corev1.ConfigMap{}, services: map[string]*corev1.Service{},
		deployments: map[string]*appsv1.Deployment{}, statefulSets: map[string]*appsv1.StatefulSet{}}
	files, err := filepath.Glob(filepath.Join(kubeDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitDocuments(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, doc := range docs {
			if err := m.decodeStrict(doc); err != nil {
				t.Errorf("%s, document %d: %v", f, i+1, err)
			}
		}
	}

	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), kubeDir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", kubeDir, err)
	}
	var built []string
	for _, r := range res.Resources() {
		built = append(built, r.GetKind()+"/"+r.GetName())
	}
	if diff := cmp.Diff(sorted(m.ids), sorted(built)); diff != "" {
		t.Errorf("kustomize build %s yields other objects than the files hold (-files +built):\n%s", kubeDir, diff)
	}
	return m
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// workload is a Deployment's or StatefulSet's pod template, by kind/name.
type workload struct {
	id       string
	selector *metav1.LabelSelector
	pod      *corev1.PodTemplateSpec
}

func (m *manifests) workloads() []workload {
	var ws []workload
	for _, name := range sorted(keys(m.deployments)) {
		d := m.deployments[name]
		ws = append(ws, workload{"Deployment/" + name, d.Spec.Selector, &d.Spec.Template})
	}
	for _, name := range sorted(keys(m.statefulSets)) {
		s := m.statefulSets[name]
		ws = append(ws, workload{"StatefulSet/" + name, s.Spec.Selector, &s.Spec.Template})
	}
	return ws
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// containerPort resolves a port (a number, or a name) of a container.
func containerPort(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// selected are the workloads whose pods svc selects.
func (m *manifests) selected(svc *corev1.Service) []workload {
	var out []workload
	for _, w := range m.workloads() {
		if len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.pod.Labels)) {
			out = append(out, w)
		}
	}
	return out
}

// servicePort is the port of Service name that a client URL's port
// reaches, and the container port it lands on in each selected pod.
func (m *manifests) serviceReaches(host, port string) error {
	svc, ok := m.services[host]
	if !ok {
		return fmt.Errorf("host %q is no Service of the manifests", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == int32(n) }) {
		return fmt.Errorf("Service %s has no port %d", host, n)
	}
	return nil
}

// TestKubernetesObjects: the manifests decode strictly, kustomize builds
// them all, every workload's selector selects its own pods, every
// Service selects pods whose containers have its target ports, and
// every probe names a port of its container.
func TestKubernetesObjects(t *testing.T) {
	m := loadManifests(t)
	for _, w := range m.workloads() {
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		if err != nil || sel.Empty() {
			t.Errorf("%s: selector %v: %v", w.id, w.selector, err)
		} else if !sel.Matches(labels.Set(w.pod.Labels)) {
			t.Errorf("%s: selector %v does not select its pods (labels %v)", w.id, w.selector, w.pod.Labels)
		}
		for _, other := range m.workloads() {
			if other.id != w.id && err == nil && sel.Matches(labels.Set(other.pod.Labels)) {
				t.Errorf("%s: selector %v also selects %s's pods", w.id, w.selector, other.id)
			}
		}
		for i := range w.pod.Spec.Containers {
			c := &w.pod.Spec.Containers[i]
			for _, p := range c.Ports {
				if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
					t.Errorf("%s, container %s: port name %q: %v", w.id, c.Name, p.Name, errs)
				}
			}
			for kind, pr := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				if pr == nil {
					continue
				}
				if pr.HTTPGet == nil {
					t.Errorf("%s, container %s: %s probe is not an HTTP GET", w.id, c.Name, kind)
					continue
				}
				if _, ok := containerPort(c, pr.HTTPGet.Port); !ok {
					t.Errorf("%s, container %s: %s probe port %s is none of the container's", w.id, c.Name, kind, pr.HTTPGet.Port.String())
				}
			}
		}
	}
	for _, name := range sorted(keys(m.services)) {
		svc := m.services[name]
		ws := m.selected(svc)
		if len(ws) == 0 {
			t.Errorf("Service %s: selector %v selects no workload's pods", name, svc.Spec.Selector)
		}
		for _, p := range svc.Spec.Ports {
			target := p.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(p.Port) // Kubernetes' default
			}
			for _, w := range ws {
				if !slices.ContainsFunc(w.pod.Spec.Containers, func(c corev1.Container) bool { _, ok := containerPort(&c, target); return ok }) {
					t.Errorf("Service %s, port %s: target port %s is no container port of %s", name, p.Name, target.String(), w.id)
				}
			}
		}
	}
}

// agentworldContainer is a container running the agentworld image, its
// arguments parsed by agentworld's command tree after Kubernetes'
// expansion of $(VAR) references.
type agentworldContainer struct {
	id  string
	c   *corev1.Container
	cmd *cobra.Command
}

// agentworldContainers parses every agentworld container's command line
// and checks its environment: agentworld variables are registered and
// read by the command, keys come from the Secret keysSecret (never a
// literal value), other variables feed $(VAR) references.
func agentworldContainers(t *testing.T, m *manifests) []agentworldContainer {
	t.Helper()
	var out []agentworldContainer
	for _, w := range m.workloads() {
		for i := range w.pod.Spec.Containers {
			c := &w.pod.Spec.Containers[i]
			if !strings.HasPrefix(c.Image, "agentworld:") {
				continue
			}
			id := w.id + ", container " + c.Name
			if len(c.Command) > 0 {
				t.Errorf("%s: command %q replaces the image's entrypoint (/agentworld); give args", id, c.Command)
			}
			vals := map[string]string{}
			var names []string
			for _, e := range c.Env {
				names = append(names, e.Name)
				vals[e.Name] = "value-of-" + e.Name
				if v, ok := envconfig.Lookup(e.Name); ok && v.Secret {
					if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
						t.Errorf("%s: %s is a key: it must come from a Secret (valueFrom.secretKeyRef), never a literal", id, e.Name)
					} else if e.ValueFrom.SecretKeyRef.Name != keysSecret {
						t.Errorf("%s: %s comes from Secret %q, want %q", id, e.Name, e.ValueFrom.SecretKeyRef.Name, keysSecret)
					}
				}
			}
			used := map[string]bool{}
			for _, a := range c.Args {
				for _, ref := range kubeVarRef.FindAllStringSubmatch(a, -1) {
					used[ref[1]] = true
				}
			}
			args, err := expandKube(c.Args, vals)
			if err != nil {
				t.Errorf("%s: %v", id, err)
			}
			cmd, err := parseCommand(args)
			if err != nil {
				t.Errorf("%s: agentworld refuses its arguments: %v", id, err)
				continue
			}
			if err := checkEnv(cmd, names, used); err != nil {
				t.Errorf("%s: %v", id, err)
			}
			out = append(out, agentworldContainer{id: id, c: c, cmd: cmd})
		}
	}
	return out
}

// TestKubernetesAgentworld: the agentworld containers' command lines are
// accepted by agentworld's own CLI: serve as a Deployment joining the
// NATS Service, advertising its pod IP on its container port, serving
// its Service's name, its probe answered by a real serve on the Host a
// kubelet sends; the workers on the same NATS Service.
func TestKubernetesAgentworld(t *testing.T) {
	m := loadManifests(t)
	byCmd := map[string][]agentworldContainer{}
	for _, c := range agentworldContainers(t, m) {
		byCmd[c.cmd.CommandPath()] = append(byCmd[c.cmd.CommandPath()], c)
	}
	if len(byCmd["agentworld serve"]) != 1 || !strings.HasPrefix(byCmd["agentworld serve"][0].id, "Deployment/agentworld,") {
		t.Fatalf("want one serve container, of Deployment agentworld: %v", byCmd)
	}
	for _, worker := range []string{"agentworld bench worker", "agentworld rollout worker"} {
		if len(byCmd[worker]) == 0 {
			t.Errorf("no container runs %s", worker)
		}
		for _, c := range byCmd[worker] {
			for _, q := range strings.Split(flagValue(c.cmd, "queue"), ",") {
				host, port, err := hostPort(q)
				if err == nil {
					err = m.serviceReaches(host, port)
				}
				if err != nil || host != "nats" {
					t.Errorf("%s: --queue %s: want the NATS Service: %v", c.id, q, err)
				}
			}
			if !strings.HasPrefix(c.id, "Deployment/") {
				t.Errorf("%s: a worker is a Deployment", c.id)
			}
		}
	}
	// docs/deployment.md: a data sample worker is the bench worker's
	// Deployment with its command changed.
	for _, c := range byCmd["agentworld bench worker"] {
		args0 := append([]string{"data", "sample", "worker"}, c.c.Args[2:]...)
		vals := map[string]string{}
		var names []string
		for _, e := range c.c.Env {
			names, vals[e.Name] = append(names, e.Name), "value-of-"+e.Name
		}
		args, err := expandKube(args0, vals)
		var cmd *cobra.Command
		if err == nil {
			cmd, err = parseCommand(args)
		}
		if err == nil {
			used := map[string]bool{}
			for _, ref := range kubeVarRef.FindAllStringSubmatch(strings.Join(args0, " "), -1) {
				used[ref[1]] = true
			}
			err = checkEnv(cmd, names, used)
		}
		if err != nil {
			t.Errorf("%s as a data sample worker: %v", c.id, err)
		}
	}

	s := byCmd["agentworld serve"][0]
	// Kubernetes sends SIGTERM, then SIGKILL after the grace period (30 s
	// unless set): a node killed before its shutdown ends keeps its lease,
	// so its sessions wait out the lease instead of moving at once.
	if g := m.deployments["agentworld"].Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < cli.ServeStopBound {
		t.Errorf("Deployment/agentworld: terminationGracePeriodSeconds %v: want at least serve's shutdown bound %v", g, cli.ServeStopBound)
	}
	if len(flagList(s.cmd, "nats-listen")) > 0 || flagValue(s.cmd, "nats-store") != "" {
		t.Errorf("%s: runs an embedded NATS server; in Kubernetes the nodes join the StatefulSet's", s.id)
	}
	for _, u := range strings.Split(flagValue(s.cmd, "cluster"), ",") {
		host, port, err := hostPort(u)
		if err == nil {
			err = m.serviceReaches(host, port)
		}
		if err != nil || host != "nats" {
			t.Errorf("%s: --cluster %s: want the NATS Service: %v", s.id, u, err)
		}
	}
	if r, err := strconv.Atoi(flagValue(s.cmd, "nats-replicas")); err != nil || r < 1 || r > int(*m.statefulSets["nats"].Spec.Replicas) {
		t.Errorf("%s: --nats-replicas %q: want 1 to the NATS servers' %d", s.id, flagValue(s.cmd, "nats-replicas"), *m.statefulSets["nats"].Spec.Replicas)
	}
	_, addrPort, err := net.SplitHostPort(flagValue(s.cmd, "addr"))
	if err != nil {
		t.Fatalf("%s: --addr: %v", s.id, err)
	}
	advHost, advPort, err := hostPort(flagValue(s.cmd, "advertise"))
	if err != nil || advHost != "value-of-POD_IP" || advPort != addrPort {
		t.Errorf("%s: --advertise %q: want the pod IP and --addr's port %s (%v)", s.id, flagValue(s.cmd, "advertise"), addrPort, err)
	}
	if flagValue(s.cmd, "node") != "value-of-POD_NAME" {
		t.Errorf("%s: --node %q: want the pod's name", s.id, flagValue(s.cmd, "node"))
	}
	if !slices.Contains(flagList(s.cmd, "allowed-hosts"), "agentworld") {
		t.Errorf("%s: --allowed-hosts %v: clients name the Service agentworld", s.id, flagList(s.cmd, "allowed-hosts"))
	}
	svc := m.services["agentworld"]
	for _, p := range svc.Spec.Ports {
		if n, ok := containerPort(s.c, p.TargetPort); !ok || strconv.Itoa(int(n)) != addrPort {
			t.Errorf("Service agentworld, port %s: reaches container port %d, serve listens on %s", p.Name, n, addrPort)
		}
	}
	if pr := s.c.ReadinessProbe; pr == nil || pr.HTTPGet == nil {
		t.Fatalf("%s: no HTTP readiness probe", s.id)
	} else if pr.HTTPGet.Path != "/ready" {
		// /health answers while the node's store cannot: the Service
		// would keep sending it requests it refuses
		t.Errorf("%s: readiness probe GET %s, want /ready", s.id, pr.HTTPGet.Path)
	}
	if pr := s.c.LivenessProbe; pr != nil && pr.HTTPGet != nil && pr.HTTPGet.Path != "/health" {
		// a node whose store is down would be restarted, which does not
		// bring the store back
		t.Errorf("%s: liveness probe GET %s, want /health", s.id, pr.HTTPGet.Path)
	}
	// A node waits up to jetstore.DefaultSetupTimeout for its store
	// before it answers anything: a liveness probe that ends sooner
	// restarts nodes still waiting for their peers.
	if pr := s.c.LivenessProbe; pr != nil {
		window := probeWindow(s.c.StartupProbe)
		if window == 0 {
			window = probeWindow(pr) + time.Duration(pr.InitialDelaySeconds)*time.Second
		}
		if window <= jetstore.DefaultSetupTimeout {
			t.Errorf("%s: the liveness probe restarts a node that has not answered within %s, no longer than the %s a node waits for its store at start: add a startup probe or an initial delay", s.id, window, jetstore.DefaultSetupTimeout)
		}
	}
	for kind, pr := range map[string]*corev1.Probe{"startup": s.c.StartupProbe, "readiness": s.c.ReadinessProbe, "liveness": s.c.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			continue
		}
		if n, _ := containerPort(s.c, pr.HTTPGet.Port); strconv.Itoa(int(n)) != addrPort {
			t.Errorf("%s: the %s probe asks port %d, serve listens on %s", s.id, kind, n, addrPort)
		}
		// A kubelet asks http://POD_IP:PORT/path, so its Host is an IP
		// address that is no name --allowed-hosts lists.
		if code := serveProbe(t, s.cmd, pr.HTTPGet.Path, net.JoinHostPort("10.1.2.3", addrPort)); code != http.StatusOK {
			t.Errorf("%s: %s probe GET %s: %d from a real serve with the container's flags, want 200", s.id, kind, pr.HTTPGet.Path, code)
		}
	}
}

// TestKubernetesNATS: NATS is a StatefulSet of JetStream servers behind
// a headless Service whose names its routes use, every server started at
// once, its configuration (read by the real nats-server) durable and
// wired to the container's ports, mounts and peers, and its probes
// answered by a real nats-server running that configuration.
func TestKubernetesNATS(t *testing.T) {
	m := loadManifests(t)
	ss, ok := m.statefulSets["nats"]
	if !ok {
		t.Fatal("no StatefulSet nats")
	}
	replicas := int(*ss.Spec.Replicas)
	if replicas < 3 {
		t.Errorf("StatefulSet nats: %d replicas; JetStream needs 3 to survive losing one", replicas)
	}
	if ss.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("StatefulSet nats: podManagementPolicy %q: with OrderedReady nats-1 waits for nats-0 to be ready, which waits for its peers", ss.Spec.PodManagementPolicy)
	}
	headless, ok := m.services[ss.Spec.ServiceName]
	if !ok || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("StatefulSet nats: serviceName %q: want a headless Service (clusterIP None) publishing pods before they are ready", ss.Spec.ServiceName)
	}
	if len(ss.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("StatefulSet nats: %d containers", len(ss.Spec.Template.Spec.Containers))
	}
	c := &ss.Spec.Template.Spec.Containers[0]
	checkNATSImage(t, "StatefulSet nats", c.Image)
	if len(c.Args) != 2 || (c.Args[0] != "-c" && c.Args[0] != "--config") {
		t.Fatalf("StatefulSet nats: args %q: want -c CONFIG", c.Args)
	}
	confPath := c.Args[1]

	// The configuration file comes from a ConfigMap mounted where -c
	// reads it.
	var conf string
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != path.Dir(confPath) {
			continue
		}
		for _, v := range ss.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil {
				cm, ok := m.configMaps[v.ConfigMap.Name]
				if !ok {
					t.Fatalf("volume %s: no ConfigMap %s", v.Name, v.ConfigMap.Name)
				}
				conf, ok = cm.Data[path.Base(confPath)]
				if !ok {
					t.Fatalf("ConfigMap %s has no key %s", cm.Name, path.Base(confPath))
				}
			}
		}
	}
	if conf == "" {
		t.Fatalf("StatefulSet nats: no ConfigMap is mounted at %s", path.Dir(confPath))
	}
	for _, e := range c.Env {
		t.Setenv(e.Name, ss.Name+"-0")
	}
	opts := &server.Options{}
	if err := opts.ProcessConfigString(conf); err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	if opts.ServerName != ss.Name+"-0" {
		t.Errorf("nats.conf: server_name %q: want each pod's own name", opts.ServerName)
	}
	checkDurableJetStream(t, opts)
	// A session's turn is one message (docs/deployment.md, "Storage").
	if opts.MaxPayload != jetstore.MaxPayload {
		t.Errorf("nats.conf: max_payload %d, want %d, what agentworld's embedded server takes: each session turn is one message", opts.MaxPayload, jetstore.MaxPayload)
	}
	for name, port := range map[string]int{"client": opts.Port, "cluster": opts.Cluster.Port, "monitor": opts.HTTPPort} {
		if n, ok := containerPort(c, intstr.FromString(name)); !ok || int(n) != port {
			t.Errorf("StatefulSet nats: container port %s is %d, nats.conf says %d", name, n, port)
		}
	}
	var routes, want []string
	for _, u := range opts.Routes {
		routes = append(routes, u.String())
	}
	for i := range replicas {
		want = append(want, fmt.Sprintf("nats://%s-%d.%s:%d", ss.Name, i, ss.Spec.ServiceName, opts.Cluster.Port))
	}
	if diff := cmp.Diff(want, routes); diff != "" {
		t.Errorf("nats.conf: the routes are not every server of the StatefulSet (-want +got):\n%s", diff)
	}
	// The store is on the pod's own volume.
	onClaim := false
	for _, vm := range c.VolumeMounts {
		if strings.HasPrefix(opts.StoreDir+"/", strings.TrimSuffix(vm.MountPath, "/")+"/") {
			onClaim = slices.ContainsFunc(ss.Spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool { return p.Name == vm.Name })
		}
	}
	if !onClaim {
		t.Errorf("nats.conf: store_dir %s is on no volume claim of the StatefulSet", opts.StoreDir)
	}

	var paths []string
	for _, pr := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			t.Fatalf("StatefulSet nats: want startup, readiness and liveness HTTP probes")
		}
		if n, _ := containerPort(c, pr.HTTPGet.Port); int(n) != opts.HTTPPort {
			t.Errorf("StatefulSet nats: probe %s asks port %d, the monitoring port is %d", pr.HTTPGet.Path, n, opts.HTTPPort)
		}
		paths = append(paths, pr.HTTPGet.Path)
	}
	// A lone server (its peers not yet up) must pass all three, or the
	// first pod to start would never be ready or would be restarted.
	for p, code := range natsProbe(t, conf, paths...) {
		if code != http.StatusOK {
			t.Errorf("StatefulSet nats: probe GET %s: %d from a real nats-server alone with this configuration, want 200", p, code)
		}
	}
}

// checkDurableJetStream checks a NATS configuration keeps agentworld's
// data on disk as agentworld's embedded server does: every acknowledged
// write synced.
func checkDurableJetStream(t *testing.T, opts *server.Options) {
	t.Helper()
	if !opts.JetStream {
		t.Error("nats.conf: JetStream is off")
	}
	if !opts.SyncAlways {
		t.Error("nats.conf: JetStream does not sync every write (sync_interval: always)")
	}
}

// probeWindow is how long a probe lets a container go unanswered before
// it gives up (period × failure threshold, with Kubernetes' defaults of
// 10 s and 3); 0 for no probe.
func probeWindow(pr *corev1.Probe) time.Duration {
	if pr == nil {
		return 0
	}
	period, failures := pr.PeriodSeconds, pr.FailureThreshold
	if period == 0 {
		period = 10
	}
	if failures == 0 {
		failures = 3
	}
	return time.Duration(period*failures) * time.Second
}
