package server

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// overheadThink is each agent's mean pause before every call of the paired
// modes. A session makes three calls a round (a step and two replays of its
// request), so at 200 ms it steps every ~0.6 s, and 256 of them send the
// fake model ~1,300 requests a second. Real agents think for seconds (an
// LLM policy generates each action), so this is a heavy load.
var overheadThink = flag.Duration("overhead.think", 200*time.Millisecond, "mean agent pause before each call in BenchmarkStepOverhead's paired modes")

// overheadProfile is where the saturated modes write a CPU profile of the
// server process (-cpuprofile profiles the benchmark's own process, where
// the agents and the fake model run).
var overheadProfile = flag.String("overhead.serveprofile", "", "write a CPU profile of the server process of BenchmarkStepOverhead's saturated modes to this file")

// overheadMemProfile is where the saturated modes write an allocation
// profile of the server process.
var overheadMemProfile = flag.String("overhead.servememprofile", "", "write an allocation profile of the server process of BenchmarkStepOverhead's saturated modes to this file")

// overheadHopProfile is where the saturated modes write a CPU profile of
// the reverse proxy's process.
var overheadHopProfile = flag.String("overhead.proxyprofile", "", "write a CPU profile of the reverse proxy process of BenchmarkStepOverhead's saturated modes to this file")

// BenchmarkStepOverhead measures what a step through the server adds over
// calling the model server directly with the same prompts (goal: <= 1 ms at
// p99), at 256 concurrent sessions against a zero-latency fake
// OpenAI-compatible server over loopback (zeroModel). Beside the server it
// measures a do-nothing reverse proxy (httputil.ReverseProxy) in the same
// place: the cost of one more loopback HTTP hop on this machine, which no
// server in the path can go below.
//
// The paired modes are the ones the goal is read from. Each of 256 agents
// owns one session and, each call after a pause (-overhead.think), makes a
// step through the server (in-memory store), then sends the very request
// that step sent to the model again directly and through the proxy, in
// alternating order, with the same client code. All paths run at the same
// time in one process, so they share the machine, the collector and the
// scheduler: the difference of their percentiles is what each hop costs,
// not what the machine was doing during one of several runs. "paired"
// steps through the native HTTP API, "paired-websocket" through the
// OpenEnv WebSocket (one connection per session, no HTTP request per step),
// "paired-own-process" runs the server and the proxy each in a process of
// their own, as `agentworld serve` runs.
//
// "saturated" and "saturated-sqlite" measure CPU, not latency: the server
// as `agentworld serve --model URL` runs it and a do-nothing reverse proxy,
// each in its own process, carry the same model requests back to back
// from 256 sessions, and each process's own CPU time per request is
// compared (cpu_serve/proxy; goal <= 1.5). "saturated" keeps sessions in
// memory (serve --no-db); "saturated-sqlite" in the SQLite store serve
// uses by default, whose group-committed, fsynced writes then count in the
// server's CPU. See stepOverheadSaturated.
func BenchmarkStepOverhead(b *testing.B) {
	for _, mode := range []struct {
		name                  string
		ownProcess, websocket bool
	}{
		{"paired", false, false},
		{"paired-websocket", false, true},
		{"paired-own-process", true, false},
	} {
		b.Run(mode.name, func(b *testing.B) {
			for b.Loop() {
				stepOverheadPaired(b, *overheadThink, mode.ownProcess, mode.websocket)
			}
		})
	}
	b.Run("saturated", func(b *testing.B) {
		for b.Loop() {
			stepOverheadSaturated(b, "")
		}
	})
	b.Run("saturated-sqlite", func(b *testing.B) {
		for b.Loop() {
			stepOverheadSaturated(b, filepath.Join(b.TempDir(), "sessions.db"))
		}
	})
}

const overheadSessions, overheadSteps = 256, 20

func stepOverheadPaired(b *testing.B, think time.Duration, ownProcess, websocket bool) {
	model := newZeroModel(b)
	c := worldmodel.New(model.URL(), "wm", &worldmodel.Options{MaxRetries: -1})
	remote, hopURL, where := "", "", "in this process"
	if ownProcess {
		srv := startServeProcess(b, model.URL(), "")
		hopProc := startServeProcess(b, model.srv.URL, "", "AGENTWORLD_TEST_SERVE_HOP=1")
		remote, hopURL = srv.base, hopProc.base
		where = "and the hop each in its own process"
		defer stopProcesses(srv, hopProc)
	} else {
		hop := httptest.NewServer(nullHop(b, model.srv.URL))
		defer hop.Close()
		hopURL = hop.URL
	}
	viaHop := worldmodel.New(hopURL+"/v1", "wm", &worldmodel.Options{MaxRetries: -1})
	var own *ownTime
	var model0 worldmodel.Completer = c
	if !ownProcess {
		own = &ownTime{}
		model0 = &modelTimer{c: c, own: own}
	}
	var mu sync.Mutex
	var direct, hop []time.Duration
	call := func(c worldmodel.Completer, req worldmodel.Request, into *[]time.Duration) error {
		start := time.Now()
		if _, err := c.Complete(context.Background(), req); err != nil {
			return err
		}
		d := time.Since(start)
		mu.Lock()
		*into = append(*into, d)
		mu.Unlock()
		return nil
	}
	through := loadRun(b, load{
		sessions: overheadSessions, steps: overheadSteps, concurrency: overheadSessions, model: model0, remote: remote, think: think, websocket: websocket, observer: own,
		afterStep: func(s, turn int, r *sim.StepResult) error {
			req, err := model.requestFor(r.Observation)
			if err != nil {
				return fmt.Errorf("session %d turn %d: %w", s, turn, err)
			}
			// Alternate the order so neither path always follows the step.
			first, second := &direct, &hop
			c1, c2 := worldmodel.Completer(c), worldmodel.Completer(viaHop)
			if turn%2 == 0 {
				first, second, c1, c2 = second, first, c2, c1
			}
			pause(think, s+overheadSessions, turn)
			if err := call(c1, req, first); err != nil {
				return err
			}
			pause(think, s+2*overheadSessions, turn)
			return call(c2, req, second)
		},
	})
	api := "HTTP"
	if websocket {
		api = "WebSocket"
	}
	label := fmt.Sprintf("paired, %s, server %s, think %v", api, where, think)
	reportOverhead(b, label, through, direct)
	reportHop(b, label, through, hop, direct)
	if own != nil {
		o50, o99 := percentile(own.d, .50), percentile(own.d, .99)
		b.ReportMetric(float64(o99.Microseconds()), "p99_sim_us")
		b.Logf("%s: the simulator's own work per step (Manager step minus the model call): p50 %v p99 %v", label, o50, o99)
	}
}

// modelTimer times each session's model calls for ownTime.
type modelTimer struct {
	c   worldmodel.Completer
	own *ownTime
}

func (t *modelTimer) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	start := time.Now()
	resp, err := t.c.Complete(ctx, req)
	t.own.model.Store(worldmodel.Affinity(ctx), time.Since(start))
	return resp, err
}

// ownTime collects, for every step, the simulator's time minus the time its
// model call took (the session's latest, since a session steps one at a
// time).
type ownTime struct {
	model sync.Map // session id -> time.Duration
	mu    sync.Mutex
	d     []time.Duration
}

func (o *ownTime) ObserveStep(ev sim.StepEvent) {
	m, _ := o.model.Load(ev.Session)
	d, _ := m.(time.Duration)
	o.mu.Lock()
	o.d = append(o.d, ev.Duration-d)
	o.mu.Unlock()
}

// nullHop is a reverse proxy in front of the model at target: one more
// loopback HTTP hop with no logic, the least any server in the path can
// cost on this machine.
func nullHop(t testing.TB, target string) http.Handler {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	// The same write buffer as the model client's (worldmodel's pooled
	// transport): a tuned proxy forwards a body of a few KiB in one write.
	p.Transport = &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, WriteBufferSize: 64 << 10}
	p.BufferPool = &bufferPool{}
	return p
}

// bufferPool reuses the proxy's copy buffers (without one, ReverseProxy
// allocates 32 KiB for every answer it copies, garbage a tuned proxy does
// not make and that would make the baseline dearer than it need be).
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// overheadChunks splits the saturated modes' steps into rounds, each
// measured on the server and then on the proxy, so that a change in what
// else the machine runs falls on both sides alike.
const overheadChunks = 10

// stepOverheadSaturated measures the process CPU per step of the server as
// `agentworld serve --model URL` runs it (helperAppServer: the bundled
// worlds, the replica router, hooks, metrics, an info log; sessions in
// memory with dbPath "", else in the SQLite store at dbPath, serve's
// default) beside that of a do-nothing reverse proxy
// (httputil.ReverseProxy) carrying the very same model requests: each in
// a process of its own, measured by its own getrusage, so neither the
// agents nor the fake model, which run in this process, count on either
// side. 256 agents step their sessions back to back (turns in
// overheadChunks rounds); after each round the bodies the server sent the
// model in it are sent, byte for byte, through the proxy to the same
// model by 256 callers. The ratio of the two CPU times per request is
// cpu_serve/proxy (goal <= 1.5).
func stepOverheadSaturated(b *testing.B, dbPath string) {
	model := newZeroModel(b)
	long := "AGENTWORLD_TEST_SERVE_FOR=10m"
	env := []string{long, "AGENTWORLD_TEST_SERVE_APP=1"}
	if *overheadProfile != "" {
		env = append(env, "AGENTWORLD_TEST_SERVE_CPUPROFILE="+*overheadProfile)
	}
	if *overheadMemProfile != "" {
		env = append(env, "AGENTWORLD_TEST_SERVE_MEMPROFILE="+*overheadMemProfile)
	}
	srv := startServeProcess(b, model.URL(), dbPath, env...)
	hopEnv := []string{long, "AGENTWORLD_TEST_SERVE_HOP=1"}
	if *overheadHopProfile != "" {
		hopEnv = append(hopEnv, "AGENTWORLD_TEST_SERVE_CPUPROFILE="+*overheadHopProfile)
	}
	hop := startServeProcess(b, model.srv.URL, "", hopEnv...)
	defer stopProcesses(srv, hop)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: overheadSessions, MaxConnsPerHost: overheadSessions}, Timeout: time.Minute}
	defer hc.CloseIdleConnections()
	post := jsonPoster(hc, srv.base)
	agents := make([]*httpAgent, overheadSessions)
	for i := range agents {
		agents[i] = &httpAgent{post: post, do: hc.Do, base: srv.base, world: "python-terminal"}
		if err := agents[i].open(); err != nil {
			b.Fatal(err)
		}
	}
	per := overheadSteps / overheadChunks
	var cpuServe, cpuHop time.Duration
	var steps, calls, bodyBytes int
	for chunk := range overheadChunks {
		mark := model.recorded()
		if chunk == 0 {
			srv.profile(b, "start") // the steps alone, not the sessions' opening
		}
		c0 := srv.cpu(b)
		var g errgroup.Group
		for s, a := range agents {
			g.Go(func() error {
				for turn := chunk*per + 1; turn <= (chunk+1)*per; turn++ {
					r, err := a.step(turn, fmt.Sprintf(`[{"keystrokes":"echo %d\n","duration":0.1}]`, turn))
					if err != nil {
						return fmt.Errorf("session %d turn %d: %w", s, turn, err)
					}
					if r.Info.Turn != turn || r.Info.PrefixBreak {
						return fmt.Errorf("session %d turn %d: %+v", s, turn, r.Info)
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		cpuServe += srv.cpu(b) - c0
		if chunk == overheadChunks-1 {
			srv.profile(b, "stop")
		}
		steps += overheadSessions * per
		bodies := model.since(mark)
		for _, b := range bodies {
			bodyBytes += len(b)
		}
		if len(bodies) != overheadSessions*per {
			b.Fatalf("%d steps sent the model %d requests, want one each", overheadSessions*per, len(bodies))
		}
		if chunk == 0 {
			hop.profile(b, "start")
		}
		h0 := hop.cpu(b)
		if err := replay(hc, hop.base+"/v1/chat/completions", bodies, overheadSessions); err != nil {
			b.Fatal(err)
		}
		cpuHop += hop.cpu(b) - h0
		if chunk == overheadChunks-1 {
			hop.profile(b, "stop")
		}
		calls += len(bodies)
	}
	for _, a := range agents {
		if err := a.close(); err != nil {
			b.Fatal(err)
		}
	}
	perServe, perHop := cpuServe/time.Duration(steps), cpuHop/time.Duration(calls)
	ratio := float64(perServe) / float64(perHop)
	b.ReportMetric(float64(perServe.Microseconds()), "cpu_serve_us/step")
	b.ReportMetric(float64(perHop.Microseconds()), "cpu_proxy_us/call")
	b.ReportMetric(ratio, "cpu_serve/proxy")
	store := "in memory"
	if dbPath != "" {
		store = "in SQLite"
	}
	b.Logf("process CPU per model request, %d sessions, %d steps (sessions %s, requests of %d bytes on average): serve %v, do-nothing reverse proxy %v: serve/proxy %.2fx (goal <= 1.5); load average %s",
		overheadSessions, steps, store, bodyBytes/calls, perServe, perHop, ratio, loadAverage())
}

// stopProcesses ends server processes gracefully and waits for them.
func stopProcesses(ps ...*serveProcess) {
	for _, p := range ps {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
	}
}

// replay POSTs each body to url as the model client does (same headers),
// from callers goroutines, and reads every answer.
func replay(hc *http.Client, url string, bodies [][]byte, callers int) error {
	var g errgroup.Group
	for c := range callers {
		g.Go(func() error {
			for i := c; i < len(bodies); i += callers {
				req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(bodies[i]))
				if err != nil {
					return err
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json")
				req.Header.Set("Authorization", "Bearer EMPTY")
				resp, err := hc.Do(req)
				if err != nil {
					return err
				}
				answer, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					return err
				}
				if resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte("</predicted_observation>")) {
					return fmt.Errorf("through the proxy: %s %.200q", resp.Status, answer)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// loadAverage is the first three fields of /proc/loadavg, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func percentile(ds []time.Duration, q float64) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[int(float64(len(ds))*q)]
}

// reportOverhead reports the p50 and p99 differences between the two paths.
func reportOverhead(b *testing.B, label string, through, direct []time.Duration) {
	t50, t99, d50, d99 := percentile(through, .50), percentile(through, .99), percentile(direct, .50), percentile(direct, .99)
	b.ReportMetric(float64((t99 - d99).Microseconds()), "p99_overhead_us")
	b.ReportMetric(float64((t50 - d50).Microseconds()), "p50_overhead_us")
	b.Logf("%s: %d steps through the server: p50 %v p99 %v; %d direct calls: p50 %v p99 %v; overhead p50 %v p99 %v (goal p99 <= 1ms)",
		label, len(through), t50, t99, len(direct), d50, d99, t50-d50, t99-d99)
}

// reportHop reports what the null hop costs over the direct path (the
// floor of any server in the path) and what the server costs over it.
func reportHop(b *testing.B, label string, through, hop, direct []time.Duration) {
	t50, t99 := percentile(through, .50), percentile(through, .99)
	h50, h99 := percentile(hop, .50), percentile(hop, .99)
	d50, d99 := percentile(direct, .50), percentile(direct, .99)
	b.ReportMetric(float64((h99 - d99).Microseconds()), "p99_hop_us")
	b.ReportMetric(float64((t99 - h99).Microseconds()), "p99_over_hop_us")
	b.Logf("%s: %d calls through a do-nothing reverse proxy: p50 %v p99 %v; the hop alone adds p50 %v p99 %v; the server adds over the hop p50 %v p99 %v",
		label, len(hop), h50, h99, h50-d50, h99-d99, t50-h50, t99-h99)
}

// zeroModel is the zero-latency backend of the overhead benchmark: an
// OpenAI-compatible endpoint that does as little as an HTTP server can. It
// keeps each request body as raw bytes (so the recording adds no pointers
// for the collector to scan while the run is measured) and answers a fixed
// reply numbered by arrival, without parsing the request. fakeModel, which
// decodes every request to answer from its last message, costs the process
// more CPU and garbage per call than the whole simulator step it serves.
type zeroModel struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newZeroModel(t testing.TB) *zeroModel {
	z := &zeroModel{}
	z.srv = httptest.NewServer(http.HandlerFunc(z.serve))
	t.Cleanup(z.srv.Close)
	return z
}

func (z *zeroModel) URL() string { return z.srv.URL + "/v1" }

func (z *zeroModel) serve(w http.ResponseWriter, r *http.Request) {
	var body []byte
	var err error
	if r.ContentLength > 0 {
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(r.Body)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The number is the body's place in the recording, taken under the
	// same lock: numbered apart, a later request could be recorded first
	// and an answer name a request not recorded yet.
	z.mu.Lock()
	z.bodies = append(z.bodies, body)
	n := int64(len(z.bodies))
	z.mu.Unlock()
	out := make([]byte, 0, 320)
	out = append(out, `{"id":"x","object":"chat.completion","created":1,"model":"wm","choices":[{"index":0,"message":{"role":"assistant","content":"<think>t</think><predicted_observation>obs `...)
	out = strconv.AppendInt(out, n, 10)
	out = append(out, `</predicted_observation>"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":7,"total_tokens":107}}`...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.Write(out)
}

// recorded is how many requests arrived so far.
func (z *zeroModel) recorded() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return len(z.bodies)
}

// since is the bodies of the requests that arrived after the first mark.
func (z *zeroModel) since(mark int) [][]byte {
	z.mu.Lock()
	defer z.mu.Unlock()
	return slices.Clone(z.bodies[mark:])
}

// requestFor finds the request that produced an observation ("obs N" is
// the Nth request) and decodes it.
func (z *zeroModel) requestFor(observation string) (worldmodel.Request, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(observation, "obs "))
	if err != nil {
		return worldmodel.Request{}, fmt.Errorf("observation %q is not one of the zero model's", observation)
	}
	z.mu.Lock()
	if n < 1 || n > len(z.bodies) {
		z.mu.Unlock()
		return worldmodel.Request{}, fmt.Errorf("observation %q: no request %d", observation, n)
	}
	b := z.bodies[n-1]
	z.mu.Unlock()
	return decodeRecorded(b)
}

// decodeRecorded reads back what the simulator sent: messages, model and
// sampling parameters, so the direct call is the same request.
func decodeRecorded(body []byte) (worldmodel.Request, error) {
	var w struct {
		Model       string               `json:"model"`
		Messages    []worldmodel.Message `json:"messages"`
		MaxTokens   int                  `json:"max_tokens"`
		Temperature *float64             `json:"temperature"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return worldmodel.Request{}, err
	}
	return worldmodel.Request{Model: w.Model, Messages: w.Messages, MaxTokens: w.MaxTokens, Temperature: w.Temperature}, nil
}
