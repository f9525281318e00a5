package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// TestGracefulShutdownDrainsInFlightSteps cancels Serve while a step waits
// on the model: the step still completes and is answered, new connections
// are refused, and Serve returns once drained without leaking goroutines.
func TestGracefulShutdownDrainsInFlightSteps(t *testing.T) {
	leaks := testkit.Leaks(t)
	model := newFakeModel(t)
	spec, _ := world.Parse([]byte(termSpec), "term.yaml")
	c := worldmodel.New(model.URL(), "wm", &worldmodel.Options{MaxRetries: -1})
	m := sim.New(&sim.Options{Worlds: map[string]*world.Spec{"term": spec},
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(c, nil)}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- New(m, &Options{DrainTimeout: 5 * time.Minute}).Serve(ctx, ln) }()
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr}
	resp, err := hc.Post(base+"/v1/sessions", "application/json", strings.NewReader(`{"world_id":"term"}`))
	if err != nil {
		t.Fatal(err)
	}
	var rep sim.Reply
	_ = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()

	arrived, release := model.Hold()
	type result struct {
		status int
		body   string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := hc.Post(base+"/v1/sessions/"+rep.SessionID+"/step", "application/json", strings.NewReader(`{"action":[{"keystrokes":"ls\n"}]}`))
		if err != nil {
			done <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- result{status: resp.StatusCode, body: string(b)}
	}()
	<-arrived
	stop() // shutdown begins with the step in flight
	// Serve closes its listener once it sees the context end: wait for
	// that (the step stays held meanwhile), bounding only a hang.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Error("new connections accepted while draining")
			break
		}
	}
	release()
	r := <-done
	if r.err != nil || r.status != 200 || !strings.Contains(r.body, `"turn":1`) {
		t.Fatalf("in-flight step during shutdown: %+v", r)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(context.Background(), sim.CreateRequest{WorldID: "term"}); errors.Is(err, sim.ErrShuttingDown) {
		t.Error("Serve closed the manager it was handed")
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	model.CloseClientConnections()
	leaks.Goroutines(4) // the fake model's httptest server is still up
}
