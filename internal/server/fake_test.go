package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

// fakeModel is an OpenAI-compatible chat endpoint that records every
// request and answers with a predictable observation.
type fakeModel struct {
	mu       sync.Mutex
	requests [][]worldmodel.Message
	down     bool
	// gate, when set, holds each request until it is closed; arrived
	// receives a value as each held request arrives.
	gate    chan struct{}
	arrived chan struct{}
	srv     *httptest.Server
}

func newFakeModel(t testing.TB) *fakeModel {
	f := &fakeModel{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeModel) URL() string { return f.srv.URL + "/v1" }

func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model    string               `json:"model"`
		Messages []worldmodel.Message `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	gate, arrived := f.gate, f.arrived
	f.mu.Unlock()
	if gate != nil {
		arrived <- struct{}{}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	down := f.down
	if !down {
		f.requests = append(f.requests, body.Messages)
	}
	n := len(f.requests)
	f.mu.Unlock()
	if down {
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
		return
	}
	last := body.Messages[len(body.Messages)-1].Content
	first := strings.SplitN(last, "\n", 2)[0]
	content := fmt.Sprintf("<think>thinking %d</think><predicted_observation>obs %d for %s</predicted_observation>", n, n, first)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":7,"total_tokens":%d}}`,
		body.Model, content, 100*n, 100*n+7)
}

func (f *fakeModel) Requests() [][]worldmodel.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]worldmodel.Message(nil), f.requests...)
}

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
