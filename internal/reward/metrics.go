package reward

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the reward server's Prometheus series: request counts and
// latency per route, judge call latency and failures, the judge-failure
// policy outcomes, and the distribution of every component.
type Metrics struct {
	requests   *prometheus.CounterVec
	reqLatency *prometheus.HistogramVec
	judgeCall  *prometheus.HistogramVec
	components *prometheus.HistogramVec
	outcomes   *prometheus.CounterVec
}

// NewMetrics registers the series on reg. Pass [Metrics.ObserveJudgeCall]
// as Options.OnJudgeCall and the metrics to [HandlerOptions]; the
// scorer's running totals are registered with [Metrics.RegisterScorer].
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentworld_reward_http_requests_total", Help: "Reward HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		reqLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentworld_reward_http_request_seconds", Help: "Reward HTTP request latency by route.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 30, 120, 600},
		}, []string{"route"}),
		judgeCall: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentworld_reward_judge_call_seconds", Help: "Judge call latency by outcome (ok, error).",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"outcome"}),
		components: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentworld_reward_component", Help: "Distribution of the reward components (rubric, rule, score) of answered items.",
			Buckets: []float64{0, 2.5, 5, 7.5, 10, 12.5, 15, 17.5, 20, 22.5, 25},
		}, []string{"component"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentworld_reward_items_total", Help: "Scored items by outcome: ok, judge_fallback, rubric_zeroed (judge failure, zero policy), dropped, manipulation, no_answer, invalid.",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.requests, m.reqLatency, m.judgeCall, m.components, m.outcomes)
	return m
}

// RegisterScorer exports a scorer's running totals (judge calls, failures,
// cache hits, calls in flight) on reg.
func (m *Metrics) RegisterScorer(reg prometheus.Registerer, s *Scorer) {
	counter := func(name, help string, f func(Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(s.Stats())) })
	}
	reg.MustRegister(
		counter("agentworld_reward_judge_calls_total", "Judge calls made.", func(st Stats) int64 { return st.JudgeCalls }),
		counter("agentworld_reward_judge_errors_total", "Judge calls that failed in transport.", func(st Stats) int64 { return st.JudgeErrors }),
		counter("agentworld_reward_judge_unparsed_total", "Judge answers without a parseable verdict.", func(st Stats) int64 { return st.JudgeUnparsed }),
		counter("agentworld_reward_judge_failed_items_total", "Items whose judge never parsed after every attempt.", func(st Stats) int64 { return st.JudgeFailed }),
		counter("agentworld_reward_judge_cache_hits_total", "Judge verdicts served from the cache.", func(st Stats) int64 { return st.CacheHits }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentworld_reward_judge_in_flight", Help: "Judge calls in flight."},
			func() float64 { return float64(s.Stats().InFlight) }),
	)
}

// ObserveJudgeCall records one judge call; it fits Options.OnJudgeCall.
func (m *Metrics) ObserveJudgeCall(d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.judgeCall.WithLabelValues(outcome).Observe(d.Seconds())
}

func (m *Metrics) observeRequest(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.reqLatency.WithLabelValues(route).Observe(d.Seconds())
}

func (m *Metrics) observeResult(r *Result) {
	m.outcomes.WithLabelValues(outcomeOf(r)).Inc()
	if r.Dropped {
		return
	}
	m.components.WithLabelValues("rubric").Observe(r.Components.Rubric)
	m.components.WithLabelValues("rule").Observe(r.Components.Rule)
	m.components.WithLabelValues("score").Observe(r.Value())
}

func outcomeOf(r *Result) string {
	switch {
	case r.Dropped:
		return "dropped"
	case r.Judge.Fallback != "":
		return "judge_fallback"
	case r.Reason == "":
		return "ok"
	case strings.HasPrefix(r.Reason, "rubric zeroed"):
		return "manipulation"
	case strings.HasPrefix(r.Reason, "no answer"):
		return "no_answer"
	case strings.HasPrefix(r.Reason, "invalid item"):
		return "invalid"
	default:
		return "rubric_zeroed"
	}
}
