package server

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// TestMetricsCountSteps checks what one observed step adds to each series.
func TestMetricsCountSteps(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.ObserveStep(sim.StepEvent{Session: "s", Domain: "terminal", Backend: "model", Result: &sim.StepResult{Info: sim.StepInfo{
		Backend: "model", PromptTokens: 100, CompletionTokens: 7, CachedTokens: 64, Retries: 1, TransportRetries: 2, PrefixBreak: true, HistoryCut: 3,
	}}})
	m.ObserveStep(sim.StepEvent{Session: "s", Domain: "terminal", Backend: "model", Err: worldmodel.ErrUnavailable})
	m.ObserveStep(sim.StepEvent{Session: "s", Domain: "terminal", Backend: "model", Err: errors.New("boom")})
	cases := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"ok steps", m.steps.WithLabelValues("terminal", "model", "ok"), 1},
		{"unavailable steps", m.steps.WithLabelValues("terminal", "model", "unavailable"), 1},
		{"failed steps", m.steps.WithLabelValues("terminal", "model", "error"), 1},
		{"prompt tokens", m.tokens.WithLabelValues("prompt"), 100},
		{"completion tokens", m.tokens.WithLabelValues("completion"), 7},
		{"cached tokens", m.tokens.WithLabelValues("cached"), 64},
		{"answer retries", m.retries, 1},
		{"transport retries", m.transport, 2},
		{"prefix breaks", m.prefixBreaks, 1},
		{"history cuts", m.historyCuts, 1},
	}
	for _, c := range cases {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRequestMetricsPerRoute: a route's kept series count each request
// under its status code and time it, from goroutines at once, like the
// label lookups they replace; a route or code never served has no series
// on /metrics.
func TestRequestMetricsPerRoute(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	step, _ := m.route("POST /v1/sessions/{id}/step"), m.route("GET /state")
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				code := 200
				if (w+i)%5 == 0 {
					code = 409
				}
				step.observe(code, time.Second/512) // 2^-9 s: sums exactly
			}
		})
	}
	wg.Wait()
	ok, conflict := 0, 0
	for w := range workers {
		for i := range each {
			if (w+i)%5 == 0 {
				conflict++
			} else {
				ok++
			}
		}
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("POST /v1/sessions/{id}/step", "200")); got != float64(ok) {
		t.Errorf("200s counted %v, want %d", got, ok)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("POST /v1/sessions/{id}/step", "409")); got != float64(conflict) {
		t.Errorf("409s counted %v, want %d", got, conflict)
	}
	want := `
# HELP agentworld_http_request_seconds HTTP request latency by route.
# TYPE agentworld_http_request_seconds histogram
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="0.0005"} 0
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="0.001"} 0
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="0.005"} 400
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="0.01"} 400
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="0.05"} 400
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="0.1"} 400
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="0.5"} 400
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="1"} 400
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="5"} 400
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="30"} 400
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="120"} 400
agentworld_http_request_seconds_bucket{route="POST /v1/sessions/{id}/step",le="+Inf"} 400
agentworld_http_request_seconds_sum{route="POST /v1/sessions/{id}/step"} 0.78125
agentworld_http_request_seconds_count{route="POST /v1/sessions/{id}/step"} 400
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentworld_http_request_seconds"); err != nil {
		t.Error(err)
	}
	// The unused route made no series: the step route's two codes are all.
	if n := testutil.CollectAndCount(m.requests); n != 2 {
		t.Errorf("%d request counters, want 2 (no series for a route never served)", n)
	}
}
