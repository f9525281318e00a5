package play

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/sim"
)

// stallingServer answers the native session API on loopback as the server
// does, except that its first step never answers: it waits until the
// client gives up (its request context ends).
func stallingServer(t *testing.T) *httptest.Server {
	var steps atomic.Int64
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		var req api.CreateSessionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.WorldID != "w" {
			http.Error(w, "bad create", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(sim.Reply{SessionID: "s1", Observation: "$ ", Info: sim.ReplyInfo{World: "w", Domain: "terminal", Backend: "replay"}})
	})
	mux.HandleFunc("POST /v1/sessions/s1/step", func(w http.ResponseWriter, r *http.Request) {
		if steps.Add(1) == 1 {
			// Reading the body lets the server notice the client hang up.
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		_ = json.NewEncoder(w).Encode(sim.StepResult{Observation: "file.txt", Terminated: true, Info: sim.StepInfo{Turn: 1, Backend: "replay", EndReason: "task_done"}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: Close waits for handlers
	return srv
}

// TestRemoteGivesUpOnAStalledStep: a step the server never answers is
// reported once the step timeout passes and the game goes on (with
// net/http's default client Play would wait forever).
func TestRemoteGivesUpOnAStalledStep(t *testing.T) {
	srv := stallingServer(t)
	c := &api.Client{BaseURL: srv.URL}
	// The create and the second step must beat the timeout too: 5 s is
	// far more than a loopback answer takes on a loaded machine.
	p := Remote(c, &RemoteOptions{StepTimeout: 5 * time.Second})
	if c.HTTP != nil {
		t.Fatal("Remote changed the client it was given")
	}
	var out strings.Builder
	done := make(chan error, 1)
	go func() { done <- Play(context.Background(), p, "w", strings.NewReader("ls\nls\n"), &out) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute): // a hang guard
		t.Fatal("play still waits on the stalled step after two minutes")
	}
	for _, want := range []string{"error: ", "Client.Timeout exceeded", "turn 1 (replay)\nfile.txt", "episode over: task_done"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRemoteOptions(t *testing.T) {
	own := &http.Client{}
	if got := Remote(&api.Client{HTTP: own}, nil); got.HTTP != own {
		t.Error("a client with its own HTTP client got another")
	}
	for _, c := range []struct {
		o    *RemoteOptions
		want time.Duration
	}{
		{nil, DefaultStepTimeout},
		{&RemoteOptions{StepTimeout: time.Second}, time.Second},
		{&RemoteOptions{StepTimeout: -1}, 0},
	} {
		cl := Remote(&api.Client{BaseURL: "http://127.0.0.1:1"}, c.o)
		if cl.HTTP == nil || cl.HTTP.Timeout != c.want || cl.HTTP.Transport == http.DefaultTransport || cl.HTTP.Transport == nil {
			t.Errorf("%+v: client %+v, want timeout %v on a transport of its own", c.o, cl.HTTP, c.want)
		}
	}
}
