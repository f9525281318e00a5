package cluster

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentworld/agentworld/internal/httpedge"
	"github.com/agentworld/agentworld/internal/jetstore"
	"github.com/agentworld/agentworld/internal/testkit"
)

// BenchmarkForward measures what forwarding a step to its owner costs:
// 64 clients send step-sized requests over kept-alive connections, either
// straight to the owner ("direct") or to another node that forwards them
// ("forwarder": this package's own forwarding; "reverseproxy":
// httputil.ReverseProxy over net/http's Transport, which a caller's
// Options.Transport selects; "edge": this package's forwarding behind the
// edge's checks, [httpedge.Guard.Admit], which reads the body first, as
// serve's handlers are). Clients, both nodes and the owner's handler run
// in this one process, so cpu_us/op is the CPU of a whole request; the
// difference to "direct" is the forward's.
func BenchmarkForward(b *testing.B) {
	answer := bytes.Repeat([]byte("x"), 1500)
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	b.Cleanup(owner.Close)
	own := func() Ownership {
		return &owners{self: "me", leases: map[string]jetstore.Lease{"s1": lease("a", owner.URL, "model", 3, true)}}
	}
	guard, err := httpedge.New(httpedge.Edge{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	front := func(opts *Options, edge bool) string {
		r := New(own(), opts)
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if edge {
				gw := guard.Writer(w)
				if ref := guard.Admit(gw, req); ref != nil {
					http.Error(w, ref.Message, ref.Status)
					return
				}
				w = gw
			}
			if handled, err := r.Route(w, req, "s1"); err != nil || !handled {
				http.Error(w, "not forwarded", http.StatusInternalServerError)
			}
		}))
		b.Cleanup(s.Close)
		return s.URL
	}
	proxied := http.DefaultTransport.(*http.Transport).Clone()
	proxied.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerNode
	for _, mode := range []struct{ name, url string }{
		{"direct", owner.URL},
		{"forwarder", front(nil, false)},
		{"reverseproxy", front(&Options{Transport: proxied}, false)},
		{"edge", front(nil, true)},
	} {
		b.Run(mode.name, func(b *testing.B) {
			benchmarkSteps(b, mode.url+"/v1/sessions/s1/step")
		})
	}
}

// benchmarkSteps sends b.N step requests to url from 64 clients and
// reports the process's CPU per request.
func benchmarkSteps(b *testing.B, url string) {
	const clients = 64
	send := stepSender(b, url, clients)
	send(clients) // connections are open before the clock starts
	b.ResetTimer()
	cpu := testkit.CPUTime()
	send(b.N)
	b.StopTimer()
	b.ReportMetric(float64((testkit.CPUTime()-cpu).Microseconds())/float64(b.N), "cpu_us/op")
}

// stepSender returns a function that sends n step requests to url from
// clients concurrent clients over kept-alive connections and waits for
// their answers.
func stepSender(b *testing.B, url string, clients int) func(n int) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = clients
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	body := `{"action":[{"keystrokes":"echo 1\n","duration":0.1}],"turn":1}`
	step := func() {
		resp, err := c.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Errorf("status %d", resp.StatusCode)
		}
	}
	return func(n int) {
		var wg sync.WaitGroup
		next := make(chan struct{})
		for range clients {
			wg.Go(func() {
				for range next {
					step()
				}
			})
		}
		for range n {
			next <- struct{}{}
		}
		close(next)
		wg.Wait()
	}
}
