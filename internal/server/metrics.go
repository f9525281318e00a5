package server

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentworld/agentworld/internal/sim"
)

// Metrics are the simulator's Prometheus series. It implements
// sim.Observer: give it to the Manager so every step is counted.
type Metrics struct {
	steps        *prometheus.CounterVec
	stepLatency  *prometheus.HistogramVec
	tokens       *prometheus.CounterVec
	prefixBreaks prometheus.Counter
	historyCuts  prometheus.Counter
	retries      prometheus.Counter
	transport    prometheus.Counter
	requests     *prometheus.CounterVec
	reqLatency   *prometheus.HistogramVec

	once sync.Once
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentworld_steps_total", Help: "Session steps by domain, backend (what answered) and outcome.",
		}, []string{"domain", "backend", "outcome"}),
		stepLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentworld_step_seconds", Help: "Step latency by backend.",
			Buckets: []float64{.0005, .001, .005, .01, .05, .1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"backend"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentworld_tokens_total", Help: "World-model tokens by kind (prompt, completion, cached).",
		}, []string{"kind"}),
		prefixBreaks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentworld_prefix_breaks_total", Help: "Requests that did not extend the previous request of their session without a truncation cut.",
		}),
		historyCuts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentworld_history_truncated_steps_total", Help: "Steps whose prompt left out early turns to fit the context budget.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentworld_answer_retries_total", Help: "Extra generations after empty or length-cut answers.",
		}),
		transport: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentworld_model_transport_retries_total", Help: "HTTP attempts the world-model client repeated (429, 5xx, timeouts, dropped connections).",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentworld_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		reqLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentworld_http_request_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.0005, .001, .005, .01, .05, .1, .5, 1, 5, 30, 120},
		}, []string{"route"}),
	}
	reg.MustRegister(m.steps, m.stepLatency, m.tokens, m.prefixBreaks, m.historyCuts, m.retries, m.transport, m.requests, m.reqLatency)
	return m
}

// ObserveStep implements sim.Observer.
func (m *Metrics) ObserveStep(ev sim.StepEvent) {
	if ev.Err != nil {
		m.steps.WithLabelValues(ev.Domain, ev.Backend, outcomeOf(ev.Err)).Inc()
		return
	}
	r := ev.Result
	outcome := "ok"
	switch {
	case r.Info.Error != "":
		outcome = "answer_error"
	case r.Terminated:
		outcome = "terminated"
	case r.Truncated:
		outcome = "truncated"
	}
	b := r.Info.Backend
	m.steps.WithLabelValues(ev.Domain, b, outcome).Inc()
	m.stepLatency.WithLabelValues(b).Observe(ev.Duration.Seconds())
	if r.Info.PromptTokens > 0 {
		m.tokens.WithLabelValues("prompt").Add(float64(r.Info.PromptTokens))
	}
	if r.Info.CompletionTokens > 0 {
		m.tokens.WithLabelValues("completion").Add(float64(r.Info.CompletionTokens))
	}
	if r.Info.CachedTokens > 0 {
		m.tokens.WithLabelValues("cached").Add(float64(r.Info.CachedTokens))
	}
	if r.Info.PrefixBreak {
		m.prefixBreaks.Inc()
	}
	if r.Info.HistoryCut > 0 {
		m.historyCuts.Inc()
	}
	if r.Info.Retries > 0 {
		m.retries.Add(float64(r.Info.Retries))
	}
	if r.Info.TransportRetries > 0 {
		m.transport.Add(float64(r.Info.TransportRetries))
	}
}

func outcomeOf(err error) string {
	switch {
	case sim.IsUnavailable(err):
		return "unavailable"
	case errors.Is(err, sim.ErrBadRequest):
		return "bad_request"
	}
	return "error"
}

// route is the request series of one route, for its guard to keep:
// looking a series up by its labels (WithLabelValues) hashes them, checks
// them and takes the vector's lock on every request. A series is still
// made on the route's first request with its status code, as the lookup
// made it, so /metrics lists only routes and codes that were served.
func (m *Metrics) route(route string) *routeSeries {
	return &routeSeries{m: m, route: route}
}

// routeSeries counts and times the requests of one route.
type routeSeries struct {
	m       *Metrics
	route   string
	latency atomic.Pointer[prometheus.Observer]
	// codes are the route's request counters by status code so far, a
	// slice replaced whole under mu as a code is first seen (a route
	// answers few codes, so a scan beats a map).
	codes atomic.Pointer[[]codeCounter]
	mu    sync.Mutex
}

type codeCounter struct {
	code int
	c    prometheus.Counter
}

// observe counts a request answered with code and records how long it
// took.
func (s *routeSeries) observe(code int, d time.Duration) {
	s.counter(code).Inc()
	lat := s.latency.Load()
	if lat == nil {
		o := s.m.reqLatency.WithLabelValues(s.route)
		lat = &o
		s.latency.Store(lat)
	}
	(*lat).Observe(d.Seconds())
}

func (s *routeSeries) counter(code int) prometheus.Counter {
	if codes := s.codes.Load(); codes != nil {
		for _, c := range *codes {
			if c.code == code {
				return c.c
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var next []codeCounter
	if codes := s.codes.Load(); codes != nil {
		for _, c := range *codes {
			if c.code == code { // added since the look above
				return c.c
			}
		}
		next = append(next, *codes...)
	}
	c := s.m.requests.WithLabelValues(s.route, strconv.Itoa(code))
	next = append(next, codeCounter{code, c})
	s.codes.Store(&next)
	return c
}

// trackSessions exports the number of open sessions, once per Metrics.
func (m *Metrics) trackSessions(reg prometheus.Registerer, mgr *sim.Manager) {
	m.once.Do(func() {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentworld_sessions_open", Help: "Sessions held open.",
		}, func() float64 { return float64(mgr.Len()) }))
	})
}
