package rollout

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/api"
	"github.com/agentworld/agentworld/internal/sim"
)

// TestRemoteGivesUpOnAStalledServer: a step the server never answers
// fails once the step timeout passes (net/http's default client would
// wait for ever, and the episode's group with it).
func TestRemoteGivesUpOnAStalledServer(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // lets the server notice the client hang up
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: Close waits for handlers
	c := &api.Client{BaseURL: srv.URL}
	r := Remote(c, 4, 300*time.Millisecond)
	if c.HTTP != nil {
		t.Fatal("Remote changed the client it was given")
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Step(context.Background(), "s1", sim.StepRequest{Action: []byte(`"ls"`), Turn: 1})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "Client.Timeout exceeded") {
			t.Fatalf("step on a stalled server: %v, want the client's timeout", err)
		}
	case <-time.After(2 * time.Minute): // a hang guard
		t.Fatal("the step still waits on the stalled server after two minutes")
	}
}

func TestRemoteStepTimeout(t *testing.T) {
	own := &http.Client{}
	if got := Remote(&api.Client{HTTP: own}, 4, 0); got.HTTP != own {
		t.Error("a client's own HTTP client was replaced")
	}
	for _, c := range []struct {
		give, want time.Duration
	}{
		{0, DefaultStepTimeout},
		{-1, 0}, // none
		{5 * time.Second, 5 * time.Second},
	} {
		if got := Remote(&api.Client{BaseURL: "http://127.0.0.1:1"}, 4, c.give).HTTP.Timeout; got != c.want {
			t.Errorf("step timeout %v: client timeout %v, want %v", c.give, got, c.want)
		}
	}
}
