package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// exporter sends spans to an OTLP HTTP receiver in OTLP's JSON encoding.
// It stands in for the SDK's otlptracehttp exporter, whose configuration
// package links gRPC (3.4 MB of the binary) for a transport this one does
// not use.
type exporter struct {
	url    string
	client *http.Client
}

func newExporter(url string) *exporter {
	return &exporter{url: url, client: &http.Client{Timeout: 10 * time.Second}}
}

// OTLP JSON wire types (opentelemetry-proto's JSON mapping: ids in hex,
// 64-bit integers as strings, enums as numbers).
type (
	exportRequest struct {
		ResourceSpans []resourceSpans `json:"resourceSpans"`
	}
	resourceSpans struct {
		Resource   resourceJSON `json:"resource"`
		ScopeSpans []scopeSpans `json:"scopeSpans"`
	}
	resourceJSON struct {
		Attributes []keyValue `json:"attributes"`
	}
	scopeSpans struct {
		Scope scopeJSON  `json:"scope"`
		Spans []spanJSON `json:"spans"`
	}
	scopeJSON struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	}
	spanJSON struct {
		TraceID           string      `json:"traceId"`
		SpanID            string      `json:"spanId"`
		ParentSpanID      string      `json:"parentSpanId,omitempty"`
		Name              string      `json:"name"`
		Kind              int         `json:"kind"`
		StartTimeUnixNano string      `json:"startTimeUnixNano"`
		EndTimeUnixNano   string      `json:"endTimeUnixNano"`
		Attributes        []keyValue  `json:"attributes,omitempty"`
		Events            []eventJSON `json:"events,omitempty"`
		Status            statusJSON  `json:"status"`
	}
	eventJSON struct {
		TimeUnixNano string     `json:"timeUnixNano"`
		Name         string     `json:"name"`
		Attributes   []keyValue `json:"attributes,omitempty"`
	}
	statusJSON struct {
		Code    int    `json:"code,omitempty"`
		Message string `json:"message,omitempty"`
	}
	keyValue struct {
		Key   string   `json:"key"`
		Value anyValue `json:"value"`
	}
	anyValue struct {
		StringValue *string     `json:"stringValue,omitempty"`
		BoolValue   *bool       `json:"boolValue,omitempty"`
		IntValue    *string     `json:"intValue,omitempty"`
		DoubleValue *float64    `json:"doubleValue,omitempty"`
		ArrayValue  *arrayValue `json:"arrayValue,omitempty"`
	}
	arrayValue struct {
		Values []anyValue `json:"values"`
	}
)

func nanos(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

func value(v attribute.Value) anyValue {
	switch v.Type() {
	case attribute.BOOL:
		b := v.AsBool()
		return anyValue{BoolValue: &b}
	case attribute.INT64:
		s := strconv.FormatInt(v.AsInt64(), 10)
		return anyValue{IntValue: &s}
	case attribute.FLOAT64:
		f := v.AsFloat64()
		return anyValue{DoubleValue: &f}
	case attribute.STRINGSLICE:
		var vs []anyValue
		for _, s := range v.AsStringSlice() {
			vs = append(vs, anyValue{StringValue: &s})
		}
		return anyValue{ArrayValue: &arrayValue{Values: vs}}
	default:
		s := v.Emit()
		return anyValue{StringValue: &s}
	}
}

func keyValues(kvs []attribute.KeyValue) []keyValue {
	out := make([]keyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = keyValue{Key: string(kv.Key), Value: value(kv.Value)}
	}
	return out
}

// kinds maps the SDK's span kinds to OTLP's enum.
var kinds = map[trace.SpanKind]int{trace.SpanKindInternal: 1, trace.SpanKindServer: 2, trace.SpanKindClient: 3, trace.SpanKindProducer: 4, trace.SpanKindConsumer: 5}

func encodeSpans(spans []sdktrace.ReadOnlySpan) exportRequest {
	var req exportRequest
	for _, s := range spans {
		sp := spanJSON{TraceID: s.SpanContext().TraceID().String(), SpanID: s.SpanContext().SpanID().String(), Name: s.Name(),
			Kind: kinds[s.SpanKind()], StartTimeUnixNano: nanos(s.StartTime()), EndTimeUnixNano: nanos(s.EndTime()), Attributes: keyValues(s.Attributes())}
		if p := s.Parent(); p.IsValid() {
			sp.ParentSpanID = p.SpanID().String()
		}
		switch s.Status().Code {
		case codes.Ok:
			sp.Status = statusJSON{Code: 1}
		case codes.Error:
			sp.Status = statusJSON{Code: 2, Message: s.Status().Description}
		}
		for _, e := range s.Events() {
			sp.Events = append(sp.Events, eventJSON{TimeUnixNano: nanos(e.Time), Name: e.Name, Attributes: keyValues(e.Attributes)})
		}
		rs := resourceSpans{ScopeSpans: []scopeSpans{{Scope: scopeJSON{Name: s.InstrumentationScope().Name, Version: s.InstrumentationScope().Version}, Spans: []spanJSON{sp}}}}
		if r := s.Resource(); r != nil {
			rs.Resource.Attributes = keyValues(r.Attributes())
		}
		req.ResourceSpans = append(req.ResourceSpans, rs)
	}
	return req
}

// ExportSpans implements sdktrace.SpanExporter: one POST per batch.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body, err := json.Marshal(encodeSpans(spans))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("otlp export: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("otlp export: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Shutdown implements sdktrace.SpanExporter.
func (e *exporter) Shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}
