package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// fakeModel is the world model of the server tests: the one fake
// OpenAI-compatible server (fakellm) answering each request with a
// predictable observation ("obs N for FIRST-LINE-OF-THE-LAST-MESSAGE"),
// which can be taken down (503) or made to hold requests.
type fakeModel struct {
	*fakellm.Server

	mu       sync.Mutex
	requests [][]worldmodel.Message // answered requests, in order
	down     bool
	// gate, when set, holds each request until it is closed; arrived
	// receives a value as each held request arrives.
	gate    chan struct{}
	arrived chan struct{}
}

func newFakeModel(t testing.TB) *fakeModel {
	f := &fakeModel{}
	f.Server = fakellm.New(f.answer)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeModel) answer(r *fakellm.Request) fakellm.Reply {
	f.mu.Lock()
	gate, arrived := f.gate, f.arrived
	f.mu.Unlock()
	if gate != nil {
		arrived <- struct{}{}
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return fakellm.Reply{Status: http.StatusServiceUnavailable}
	}
	msgs := make([]worldmodel.Message, len(r.Messages))
	for i, m := range r.Messages {
		msgs[i] = worldmodel.Message{Role: m.Role, Content: m.Content}
	}
	f.requests = append(f.requests, msgs)
	n := len(f.requests)
	first := strings.SplitN(r.Messages[len(r.Messages)-1].Content, "\n", 2)[0]
	return fakellm.Reply{
		Content:      fmt.Sprintf("<think>thinking %d</think><predicted_observation>obs %d for %s</predicted_observation>", n, n, first),
		PromptTokens: 100 * n, CompletionTokens: 7,
	}
}

// URL is the base URL to give a client, ending in /v1.
func (f *fakeModel) URL() string { return f.Server.URL }

// Requests returns the messages of every answered request, in order.
func (f *fakeModel) Requests() [][]worldmodel.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]worldmodel.Message(nil), f.requests...)
}

// SetDown makes the model answer 503 (d) or answer again.
func (f *fakeModel) SetDown(d bool) {
	f.mu.Lock()
	f.down = d
	f.mu.Unlock()
}

// Hold makes requests wait until the returned release is called.
func (f *fakeModel) Hold() (arrived <-chan struct{}, release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate, f.arrived = make(chan struct{}), make(chan struct{}, 16)
	g := f.gate
	return f.arrived, func() {
		f.mu.Lock()
		f.gate = nil
		f.mu.Unlock()
		close(g)
	}
}
