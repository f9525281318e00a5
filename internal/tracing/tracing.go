// Package tracing exports OpenTelemetry spans of agentworld's work — every
// call to a world model or a judge, and every simulator step — over OTLP
// HTTP (JSON encoding), named and attributed after the OpenTelemetry semantic conventions
// for generative AI (gen_ai.*), so trace stores that read those
// conventions (Langfuse, Phoenix, Jaeger, …) show them as model calls. It
// is off unless a command is given an endpoint.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// InstrumentationName names the tracer of every span.
const InstrumentationName = "github.com/agentworld/agentworld"

// Roles a traced model call plays (agentworld.role).
const (
	RoleWorldModel = "world_model"
	RoleJudge      = "judge"
)

// Tracer exports spans; a nil *Tracer traces nothing, so callers need not
// check whether tracing is on.
type Tracer struct {
	tp *sdktrace.TracerProvider
	t  trace.Tracer
}

// New starts exporting to endpoint, an OTLP HTTP base URL
// ("http://localhost:4318"; spans go to its /v1/traces), as service. Close
// flushes and stops it.
func New(endpoint, service string) (*Tracer, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--otel-endpoint %q: want an http(s) URL of an OTLP HTTP receiver, e.g. http://localhost:4318", endpoint)
	}
	exp := newExporter(strings.TrimSuffix(endpoint, "/") + "/v1/traces")
	res := resource.NewSchemaless(attribute.String("service.name", service))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(2*time.Second)), sdktrace.WithResource(res))
	return &Tracer{tp: tp, t: tp.Tracer(InstrumentationName)}, nil
}

// Close exports what is buffered and stops the exporter.
func (t *Tracer) Close(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Completer returns c with every call traced as a GenAI "chat" span of the
// given role; with a nil Tracer it returns c itself.
func (t *Tracer) Completer(c worldmodel.Completer, role, model string) worldmodel.Completer {
	if t == nil || c == nil {
		return c
	}
	return &completer{c: c, t: t.t, role: role, model: model}
}

type completer struct {
	c           worldmodel.Completer
	t           trace.Tracer
	role, model string
}

// Complete implements worldmodel.Completer.
func (c *completer) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	model := req.Model
	if model == "" {
		model = c.model
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", "openai"), // the wire protocol: OpenAI-compatible
		attribute.String("gen_ai.request.model", model),
		attribute.String("agentworld.role", c.role),
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, attribute.Int("gen_ai.request.max_tokens", req.MaxTokens))
	}
	if req.Temperature != nil {
		attrs = append(attrs, attribute.Float64("gen_ai.request.temperature", *req.Temperature))
	}
	if req.TopP != nil {
		attrs = append(attrs, attribute.Float64("gen_ai.request.top_p", *req.TopP))
	}
	if req.Seed != nil {
		attrs = append(attrs, attribute.Int64("gen_ai.request.seed", *req.Seed))
	}
	ctx, span := c.t.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	resp, err := c.c.Complete(ctx, req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.String("error.type", errorType(err)))
		return resp, err
	}
	span.SetAttributes(
		attribute.String("gen_ai.response.model", resp.Model),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{resp.FinishReason}),
		attribute.Int("gen_ai.usage.input_tokens", resp.PromptTokens),
		attribute.Int("gen_ai.usage.output_tokens", resp.CompletionTokens),
		attribute.Int("agentworld.attempts", resp.Attempts),
	)
	if resp.ServedBy != "" {
		span.SetAttributes(attribute.String("agentworld.replica", resp.ServedBy))
	}
	return resp, nil
}

func errorType(err error) string {
	for _, e := range []struct {
		err  error
		name string
	}{{worldmodel.ErrUnavailable, "unavailable"}, {worldmodel.ErrRejected, "rejected"}, {worldmodel.ErrNoChoices, "no_choices"}, {context.Canceled, "canceled"}, {context.DeadlineExceeded, "timeout"}} {
		if errors.Is(err, e.err) {
			return e.name
		}
	}
	return "_OTHER"
}

// Observer returns a sim.Observer that records every simulator step as a
// span (agentworld.step, its start set back by the step's duration) and
// then tells next (nil: nobody); with a nil Tracer it returns next.
func (t *Tracer) Observer(next sim.Observer) sim.Observer {
	if t == nil {
		return next
	}
	return &observer{t: t.t, next: next}
}

type observer struct {
	t    trace.Tracer
	next sim.Observer
}

// ObserveStep implements sim.Observer.
func (o *observer) ObserveStep(e sim.StepEvent) {
	end := time.Now()
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("agentworld.session", e.Session),
		attribute.String("agentworld.domain", e.Domain),
		attribute.String("agentworld.backend", e.Backend),
	}
	if r := e.Result; r != nil {
		attrs = append(attrs, attribute.Int("agentworld.turn", r.Info.Turn), attribute.Float64("agentworld.reward", r.Reward),
			attribute.Bool("agentworld.terminated", r.Terminated), attribute.Bool("agentworld.truncated", r.Truncated),
			attribute.Int("gen_ai.usage.input_tokens", r.Info.PromptTokens), attribute.Int("gen_ai.usage.output_tokens", r.Info.CompletionTokens))
		if r.Info.Model != "" {
			attrs = append(attrs, attribute.String("gen_ai.request.model", r.Info.Model))
		}
	}
	_, span := o.t.Start(context.Background(), "step "+e.Domain, trace.WithTimestamp(end.Add(-e.Duration)), trace.WithAttributes(attrs...))
	if e.Err != nil {
		span.RecordError(e.Err)
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(end))
	if o.next != nil {
		o.next.ObserveStep(e)
	}
}
