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
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// instantModel is a zero-latency in-process world model.
type instantModel struct{ n atomic.Int64 }

func (m *instantModel) Complete(_ context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	n := m.n.Add(1)
	return &worldmodel.Response{Content: fmt.Sprintf("<predicted_observation>out %d</predicted_observation>", n), FinishReason: "stop", PromptTokens: len(req.Messages)}, nil
}

// loadRun drives sessions x steps through a real loopback server and
// returns per-step latencies.
// loadRun steps sessions through the HTTP API and returns every step's
// latency. think is an agent's pause before each step (0: step back to back,
// which saturates the machine); the pause is spread per session so sessions
// do not step in lockstep.
func loadRun(t testing.TB, sessions, steps, concurrency int, c worldmodel.Completer, dbPath string, think time.Duration) []time.Duration {
	spec, err := world.Parse([]byte(termSpec), "term.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var st sim.Store
	if dbPath != "" {
		db, err := store.Open(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		st = db
	}
	m := sim.New(&sim.Options{
		Store: st, Worlds: map[string]*world.Spec{"term": spec}, MaxSessions: concurrency + 8,
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(c, nil)},
	})
	srv := New(m, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	tr := &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	post := func(path string, body any, out any) error {
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
	lat := make([][]time.Duration, sessions)
	var g errgroup.Group
	g.SetLimit(concurrency)
	for s := 0; s < sessions; s++ {
		g.Go(func() error {
			var rep sim.Reply
			if err := post("/v1/sessions", map[string]any{"world_id": "term"}, &rep); err != nil {
				return err
			}
			for i := 1; i <= steps; i++ {
				pause(think, s, i)
				start := time.Now()
				var r sim.StepResult
				act := fmt.Sprintf(`[{"keystrokes":"echo %d\n","duration":0.1}]`, i)
				if err := post("/v1/sessions/"+rep.SessionID+"/step", map[string]any{"action": act, "turn": i}, &r); err != nil {
					return err
				}
				lat[s] = append(lat[s], time.Since(start))
				if r.Info.Turn != i || r.Info.PrefixBreak {
					return fmt.Errorf("session %s turn %d: %+v", rep.SessionID, i, r.Info)
				}
			}
			req, _ := http.NewRequest("DELETE", base+"/v1/sessions/"+rep.SessionID, nil)
			resp, err := hc.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return all
}

// waitGoroutines waits for the goroutine count to come back to at most
// want, and fails with a dump if it does not.
func waitGoroutines(t testing.TB, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines after the run, want <= %d:\n%s", n, want, buf)
		}
		time.Sleep(50 * time.Millisecond)
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
	g0 := runtime.NumGoroutine()
	lat := loadRun(t, sessions, 20, 64, &instantModel{}, filepath.Join(t.TempDir(), "load.db"), 0)
	if len(lat) != sessions*20 {
		t.Fatalf("%d steps, want %d", len(lat), sessions*20)
	}
	waitGoroutines(t, g0)
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
		g0 := runtime.NumGoroutine()
		lat := loadRun(b, 1000, 20, 64, &instantModel{}, filepath.Join(b.TempDir(), "load.db"), 0)
		waitGoroutines(b, g0)
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
