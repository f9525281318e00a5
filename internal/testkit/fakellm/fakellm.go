// Package fakellm is an in-process OpenAI-compatible chat server for tests:
// it answers /v1/chat/completions with whatever a test decides, and can
// delay, fail with any status, drop the connection, return reasoning_content
// and stop with finish_reason=length, counting every request it sees. It is
// part of the test kit: only test files import it, and the dependency test
// of cmd/agentworld fails if the binary links anything under internal/testkit.
package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"time"
)

// Message is one chat message as the server received it.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is a decoded chat completion request.
type Request struct {
	Model    string
	Messages []Message
	// Body is the whole request body, for checking the parameters a client
	// sent (max_tokens, temperature, extra fields, …).
	Body map[string]any
	// Raw is the request body as its bytes arrived, for tests that check a
	// request was sent again byte for byte (decoding would hide a change
	// of field order, spacing or number formatting).
	Raw []byte
	// Header is the request's HTTP header. Kill tests give the run they
	// kill its own bearer token, so that a request the killed process sent
	// but the server read only after the kill is not counted as the
	// resumed run's.
	Header http.Header
	// Seq numbers requests from 1 in arrival order.
	Seq int
}

// Reply is what the server does with one request. The zero value answers
// 200 with empty content and finish_reason "stop".
type Reply struct {
	Content      string
	Reasoning    string
	FinishReason string
	// Delay is waited before answering (cut short when the client goes away).
	Delay time.Duration
	// Status, when not 0 or 200, answers with that HTTP status and an
	// OpenAI-style error body.
	Status int
	// Drop hijacks the connection and closes it without an answer.
	Drop bool
	// PromptTokens and CompletionTokens fill usage.
	PromptTokens, CompletionTokens int
	// ContentBytes, when positive, replaces Content with that many bytes of
	// "x", streamed in chunks without ever being held whole (for tests of a
	// client's response cap); streaming stops when the client hangs up.
	ContentBytes int64
}

// Handler decides the reply to one request; it runs concurrently.
type Handler func(*Request) Reply

// Server is a running fake endpoint.
type Server struct {
	// URL is the base URL to give a client, ending in /v1.
	URL string

	srv     *httptest.Server
	handler Handler

	mu   sync.Mutex
	seq  int
	reqs []*Request
}

// New starts a server on 127.0.0.1 answering with h. Close it when done.
func New(h Handler) *Server {
	s := &Server{handler: h}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close stops the server, cutting open requests.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// CloseClientConnections closes the connections clients hold open to the
// server (keep-alive ones included), leaving it serving.
func (s *Server) CloseClientConnections() { s.srv.CloseClientConnections() }

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

// Count is the number of requests received so far.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// CountFunc is the number of requests received so far for which keep
// returns true.
func (s *Server) CountFunc(keep func(*Request) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.reqs {
		if keep(r) {
			n++
		}
	}
	return n
}

// Reset forgets the requests received so far.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	var body map[string]any
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "bad json: "+err.Error())
		return
	}
	var typed struct {
		Model    string    `json:"model"`
		Messages []Message `json:"messages"`
	}
	_ = json.Unmarshal(raw, &typed)
	req := &Request{Model: typed.Model, Messages: typed.Messages, Body: body, Raw: raw, Header: r.Header.Clone()}
	s.mu.Lock()
	s.seq++
	req.Seq = s.seq
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()

	rep := s.handler(req)
	if rep.Delay > 0 {
		t := time.NewTimer(rep.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if rep.Drop {
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("fakellm: connection cannot be hijacked")
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		writeError(w, rep.Status, fmt.Sprintf("fake failure %d", rep.Status))
		return
	}
	finish := rep.FinishReason
	if finish == "" {
		finish = "stop"
	}
	if rep.ContentBytes > 0 {
		streamContent(w, rep.ContentBytes, finish)
		return
	}
	msg := map[string]any{"role": "assistant", "content": rep.Content}
	if rep.Reasoning != "" {
		msg["reasoning_content"] = rep.Reasoning
	}
	out := map[string]any{
		"id":      fmt.Sprintf("chatcmpl-%d", req.Seq),
		"object":  "chat.completion",
		"created": 1,
		"model":   typed.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": map[string]any{
			"prompt_tokens":     rep.PromptTokens,
			"completion_tokens": rep.CompletionTokens,
			"total_tokens":      rep.PromptTokens + rep.CompletionTokens,
		},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// streamContent answers a chat completion whose content is n bytes of "x",
// written 64 KiB at a time.
func streamContent(w http.ResponseWriter, n int64, finish string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for n > 0 {
		k := min(n, int64(len(chunk)))
		if _, err := w.Write(chunk[:k]); err != nil {
			return // the client hung up
		}
		n -= k
	}
	fmt.Fprintf(w, `"},"finish_reason":%q}]}`, finish)
}

// HeapGrowth runs f and returns how far HeapInuse rose above its level at
// the start (after a GC), sampled every millisecond while f runs: a test's
// evidence that a client reading a huge answer from this server keeps its
// memory flat. Sampling may miss a spike shorter than a millisecond.
func HeapGrowth(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return peak - base
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "fake", "code": status}})
}
