package server

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/world"
)

// BenchmarkStepEdge measures, in one process and without a network, what
// the server's own layers cost a step request: "step" is POST
// /v1/sessions/{id}/step through the real mux, guard and handler into an
// in-memory Manager whose world model answers at once (instantModel);
// "edge" is the same request through the mux and guard to a handler that
// only reads the body and writes a fixed reply, the edge's share alone;
// "bare" is that handler without the guard (the mux and net/http's body
// as they are), so edge minus bare is what the guard adds to a request.
// The request and the ResponseWriter are reused, as net/http's own are
// made by net/http, so allocs/op counts what the server allocates, not
// the harness. The cost of one more loopback HTTP hop is what
// BenchmarkStepOverhead's saturated modes compare against.
func BenchmarkStepEdge(b *testing.B) {
	spec, err := world.Parse([]byte(termSpec), "term.yaml")
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	m := sim.New(&sim.Options{
		Worlds: map[string]*world.Spec{"term": spec}, Observer: met,
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(&instantModel{}, nil)},
	})
	b.Cleanup(func() { _ = m.Close(context.Background()) })
	s := New(m, &Options{Registry: reg, Metrics: met})
	reply := []byte(`{"observation":"obs","reward":0,"terminated":false,"truncated":false,"info":{"turn":1}}`)
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := readBody(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		setJSONType(w)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(reply)
	})
	s.Handle("POST /bench/{id}/step", answer)
	s.mux.Handle("POST /bare/{id}/step", answer)
	h := s.Handler()

	b.Run("step", func(b *testing.B) {
		// A session takes stepsPerSession turns, then the next one (made
		// off the clock) takes over, so prompts stay the size of a short
		// episode however long the benchmark runs.
		const stepsPerSession = 20
		br := newBenchRequest("")
		turn := stepsPerSession
		for b.Loop() {
			if turn == stepsPerSession {
				b.StopTimer()
				rep, err := m.Create(context.Background(), sim.CreateRequest{WorldID: "term"})
				if err != nil {
					b.Fatal(err)
				}
				br.setPath("/v1/sessions/" + rep.SessionID + "/step")
				turn = 0
				b.StartTimer()
			}
			turn++
			br.serve(b, h, turn)
		}
	})
	for _, route := range []struct{ name, path string }{
		{"edge", "/bench/s_0123456789abcdef/step"},
		{"bare", "/bare/s_0123456789abcdef/step"},
	} {
		b.Run(route.name, func(b *testing.B) {
			br := newBenchRequest(route.path)
			for b.Loop() {
				br.serve(b, h, 1)
			}
		})
	}
}

// benchRequest is a step request and its ResponseWriter, remade in place
// for each call as a client's keep-alive connection would send it.
type benchRequest struct {
	r    *http.Request
	body benchBody
	buf  []byte
	w    benchWriter
}

func newBenchRequest(path string) *benchRequest {
	r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/", nil)
	if err != nil {
		panic(err)
	}
	r.Header.Set("User-Agent", "Go-http-client/1.1")
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept-Encoding", "gzip")
	r.RemoteAddr = "127.0.0.1:40000"
	br := &benchRequest{r: r, w: benchWriter{h: http.Header{}}}
	if path != "" {
		br.setPath(path)
	}
	return br
}

func (br *benchRequest) setPath(path string) {
	br.r.URL.Path, br.r.RequestURI = path, path
}

// serve sends the step of turn through h and checks the reply is a 200.
func (br *benchRequest) serve(b *testing.B, h http.Handler, turn int) {
	br.buf = append(br.buf[:0], `{"action":"[{\"keystrokes\":\"echo `...)
	br.buf = strconv.AppendInt(br.buf, int64(turn), 10)
	br.buf = append(br.buf, `\\n\",\"duration\":0.1}]","turn":`...)
	br.buf = strconv.AppendInt(br.buf, int64(turn), 10)
	br.buf = append(br.buf, '}')
	br.body.b, br.body.off = br.buf, 0
	br.r.Body, br.r.ContentLength = &br.body, int64(len(br.buf))
	clear(br.w.h)
	br.w.status, br.w.n = 0, 0
	h.ServeHTTP(&br.w, br.r)
	if br.w.status != http.StatusOK || br.w.n == 0 {
		b.Fatalf("turn %d: status %d, %d bytes", turn, br.w.status, br.w.n)
	}
}

// benchBody is a request body read from a reused buffer.
type benchBody struct {
	b   []byte
	off int
}

func (r *benchBody) Read(p []byte) (int, error) {
	if r.off >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}

func (r *benchBody) Close() error { return nil }

// benchWriter is a ResponseWriter that counts what is written and, like
// net/http's, takes read and write deadlines (through
// http.ResponseController).
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header { return w.h }

func (w *benchWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *benchWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}

func (w *benchWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *benchWriter) SetWriteDeadline(time.Time) error { return nil }
