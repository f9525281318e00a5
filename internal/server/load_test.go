package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// instantModel is a zero-latency in-process world model.
type instantModel struct{ n atomic.Int64 }

func (m *instantModel) Complete(_ context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	n := m.n.Add(1)
	return &worldmodel.Response{Content: fmt.Sprintf("<predicted_observation>out %d</predicted_observation>", n), FinishReason: "stop", PromptTokens: len(req.Messages)}, nil
}

// load describes one loadRun.
type load struct {
	sessions, steps int
	// concurrency bounds the sessions in flight at once.
	concurrency int
	model       worldmodel.Completer
	// remote is the base URL of a server running in another process; ""
	// serves one in this process with model and dbPath.
	remote string
	// dbPath is the SQLite store's file; "" keeps sessions in memory.
	dbPath string
	// think is an agent's pause before each step (0: back to back, which
	// saturates the machine); it varies per session and turn so sessions do
	// not step in lockstep.
	think time.Duration
	// observer, when set, sees every step of the in-process server.
	observer sim.Observer
	// websocket steps through the OpenEnv WebSocket instead of the native
	// HTTP API.
	websocket bool
	// afterStep, when set, runs after each step, outside its timing (the
	// overhead benchmark makes its paired direct call there).
	afterStep func(session, turn int, r *sim.StepResult) error
}

// loadRun steps l.sessions sessions through the HTTP API of a real loopback
// server and returns every step's latency, session by session in turn
// order.
func loadRun(t testing.TB, l load) []time.Duration {
	base, stop := l.remote, func() {}
	if base == "" {
		base, stop = startLoadServer(t, l)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: l.concurrency, MaxConnsPerHost: l.concurrency}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	post := jsonPoster(hc, base)
	lat := make([][]time.Duration, l.sessions)
	var g errgroup.Group
	g.SetLimit(l.concurrency)
	for s := 0; s < l.sessions; s++ {
		g.Go(func() error {
			var a agent = &httpAgent{post: post, do: hc.Do, base: base}
			if l.websocket {
				a = &wsAgent{url: "ws" + strings.TrimPrefix(base, "http") + "/ws"}
			}
			if err := a.open(); err != nil {
				return err
			}
			for i := 1; i <= l.steps; i++ {
				pause(l.think, s, i)
				start := time.Now()
				act := fmt.Sprintf(`[{"keystrokes":"echo %d\n","duration":0.1}]`, i)
				r, err := a.step(i, act)
				if err != nil {
					return err
				}
				lat[s] = append(lat[s], time.Since(start))
				if r.Info.Turn != i || r.Info.PrefixBreak {
					return fmt.Errorf("session %d turn %d: %+v", s, i, r.Info)
				}
				if l.afterStep != nil {
					if err := l.afterStep(s, i, r); err != nil {
						return err
					}
				}
			}
			return a.close()
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	stop()
	tr.CloseIdleConnections()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return all
}

// jsonPoster POSTs JSON bodies to paths under base and decodes the
// answers into out (when not nil); an answer >= 300 is an error.
func jsonPoster(hc *http.Client, base string) func(path string, body, out any) error {
	return func(path string, body any, out any) error {
		b, _ := json.Marshal(body)
		resp, err := hc.Post(base+path, "application/json", bytes.NewReader(b))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			return fmt.Errorf("%s %s: %s", path, resp.Status, raw)
		}
		if out != nil {
			return json.Unmarshal(raw, out)
		}
		return nil
	}
}

// agent is one load session's client of the server.
type agent interface {
	open() error
	step(turn int, action string) (*sim.StepResult, error)
	close() error
}

// httpAgent uses the native session API: create, step with turn numbers,
// delete.
type httpAgent struct {
	post func(path string, body, out any) error
	do   func(*http.Request) (*http.Response, error)
	base string
	// world is the world its session runs; "" means the tests' term.
	world string
	id    string
}

func (a *httpAgent) open() error {
	w := a.world
	if w == "" {
		w = "term"
	}
	var rep sim.Reply
	if err := a.post("/v1/sessions", map[string]any{"world_id": w}, &rep); err != nil {
		return err
	}
	a.id = rep.SessionID
	return nil
}

func (a *httpAgent) step(turn int, action string) (*sim.StepResult, error) {
	var r sim.StepResult
	err := a.post("/v1/sessions/"+a.id+"/step", map[string]any{"action": action, "turn": turn}, &r)
	return &r, err
}

func (a *httpAgent) close() error {
	req, _ := http.NewRequest("DELETE", a.base+"/v1/sessions/"+a.id, nil)
	resp, err := a.do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// wsAgent is an OpenEnv client on the WebSocket: reset, steps, close, one
// connection per session.
type wsAgent struct {
	url  string
	c    *websocket.Conn
	turn int
}

func (a *wsAgent) call(typ string, data any) (*api.OpenEnvResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, a.c, map[string]any{"type": typ, "data": data}); err != nil {
		return nil, err
	}
	var msg api.OpenEnvWSMessage
	if err := wsjson.Read(ctx, a.c, &msg); err != nil {
		return nil, err
	}
	if msg.Type != "observation" {
		return nil, fmt.Errorf("websocket %s: %s %s", typ, msg.Type, msg.Data)
	}
	var r api.OpenEnvResult
	return &r, json.Unmarshal(msg.Data, &r)
}

func (a *wsAgent) open() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, a.url, nil)
	if err != nil {
		return err
	}
	a.c = c
	_, err = a.call("reset", map[string]any{"world_id": "term"})
	return err
}

func (a *wsAgent) step(turn int, action string) (*sim.StepResult, error) {
	r, err := a.call("step", map[string]any{"action": json.RawMessage(action)})
	if err != nil {
		return nil, err
	}
	return &sim.StepResult{Observation: r.Observation.Text, Terminated: r.Done, Info: sim.StepInfo{Turn: r.Observation.Turn}}, nil
}

func (a *wsAgent) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = wsjson.Write(ctx, a.c, map[string]any{"type": "close"})
	return a.c.Close(websocket.StatusNormalClosure, "")
}

// observers tells each of its observers about every step.
type observers []sim.Observer

func (o observers) ObserveStep(ev sim.StepEvent) {
	for _, x := range o {
		x.ObserveStep(ev)
	}
}

// startLoadServer serves the simulator for l in this process and returns
// its base URL and a function that shuts it down.
func startLoadServer(t testing.TB, l load) (string, func()) {
	spec, err := world.Parse([]byte(termSpec), "term.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var st sim.Store
	if l.dbPath != "" {
		db, err := store.Open(l.dbPath)
		if err != nil {
			t.Fatal(err)
		}
		st = db
	}
	// Metrics as `agentworld serve` keeps them: every step and request is
	// counted.
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	obs := sim.Observer(met)
	if l.observer != nil {
		obs = observers{met, l.observer}
	}
	m := sim.New(&sim.Options{
		Store: st, Worlds: map[string]*world.Spec{"term": spec}, MaxSessions: l.concurrency + 8, Observer: obs,
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(l.model, nil)},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- New(m, &Options{Metrics: met, Registry: reg}).Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), func() {
		cancel()
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		// Serve leaves the manager to whoever made it.
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoadSessionsSteps runs 1,000 sessions x 20 steps (64 at a time)
// through a loopback server with the SQLite store: zero errors, and no
// goroutine or heap growth once the server is shut down. Under -race or
// -short it runs 100 sessions; BenchmarkLoad1000x20 runs the full size
// with the race detector on as well.
func TestLoadSessionsSteps(t *testing.T) {
	sessions := 1000
	if raceEnabled || testing.Short() {
		sessions = 100
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	leaks := testkit.Leaks(t)
	lat := loadRun(t, load{sessions: sessions, steps: 20, concurrency: 64, model: &instantModel{}, dbPath: filepath.Join(t.TempDir(), "load.db")})
	if len(lat) != sessions*20 {
		t.Fatalf("%d steps, want %d", len(lat), sessions*20)
	}
	leaks.Goroutines(0)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grow := int64(after.HeapAlloc) - int64(before.HeapAlloc); grow > 32<<20 {
		t.Fatalf("heap grew by %d MiB after the run", grow>>20)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("%d steps: p50 %v p99 %v", len(lat), lat[len(lat)/2], lat[len(lat)*99/100])
}

func BenchmarkLoad1000x20(b *testing.B) {
	for i := 0; i < b.N; i++ {
		leaks := testkit.Leaks(b)
		lat := loadRun(b, load{sessions: 1000, steps: 20, concurrency: 64, model: &instantModel{}, dbPath: filepath.Join(b.TempDir(), "load.db")})
		leaks.Goroutines(0)
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(len(lat)), "steps")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99_us")
	}
}

// pause sleeps an agent's think time: think scaled by a factor in [0.5, 1.5)
// that depends on the session and turn, so sessions drift apart.
func pause(think time.Duration, session, turn int) {
	if think <= 0 {
		return
	}
	f := 0.5 + float64((session*7919+turn*104729)%1000)/1000
	time.Sleep(time.Duration(float64(think) * f))
}
