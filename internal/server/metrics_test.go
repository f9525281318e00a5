package server

import (
	"errors"
	"testing"

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
