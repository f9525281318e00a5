package tracing

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// receiver is an OTLP HTTP receiver (JSON) that keeps every span.
type receiver struct {
	mu    sync.Mutex
	spans []map[string]any
	ctype string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	var body struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []map[string]any `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Spans []map[string]any `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	b, _ := io.ReadAll(req.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctype = req.Header.Get("Content-Type")
	for _, rs := range body.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	w.Write([]byte("{}"))
}

// attrs flattens a span's OTLP attributes into key → value.
func attrs(span map[string]any) map[string]any {
	out := map[string]any{}
	list, _ := span["attributes"].([]any)
	for _, a := range list {
		kv := a.(map[string]any)
		v := kv["value"].(map[string]any)
		for _, x := range v {
			out[kv["key"].(string)] = x
		}
	}
	return out
}

type fakeModel struct{ err error }

func (f fakeModel) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &worldmodel.Response{Content: "ok", Model: "wm-served", FinishReason: "stop", PromptTokens: 120, CompletionTokens: 7, Attempts: 1}, nil
}

func TestSpansReachAnOTLPReceiver(t *testing.T) {
	rec := &receiver{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	tr, err := New(srv.URL, "agentworld test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	temp := 0.6
	c := tr.Completer(fakeModel{}, RoleWorldModel, "wm")
	if _, err := c.Complete(ctx, worldmodel.Request{MaxTokens: 100, Temperature: &temp}); err != nil {
		t.Fatal(err)
	}
	j := tr.Completer(fakeModel{err: worldmodel.ErrUnavailable}, RoleJudge, "judge-m")
	if _, err := j.Complete(ctx, worldmodel.Request{}); !errors.Is(err, worldmodel.ErrUnavailable) {
		t.Fatalf("judge error = %v", err)
	}
	tr.Observer(nil).ObserveStep(sim.StepEvent{Session: "s1", Domain: "terminal", Backend: "model", Duration: 250 * time.Millisecond,
		Result: &sim.StepResult{Reward: 1, Info: sim.StepInfo{Turn: 3, Model: "wm", PromptTokens: 50, CompletionTokens: 5}}})
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.ctype != "application/json" || len(rec.spans) != 3 {
		t.Fatalf("received %d spans (%s): %v", len(rec.spans), rec.ctype, rec.spans)
	}
	byName := map[string]map[string]any{}
	for _, s := range rec.spans {
		byName[s["name"].(string)] = s
	}
	chat := byName["chat wm"]
	a := attrs(chat)
	for k, want := range map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "wm", "gen_ai.response.model": "wm-served",
		"gen_ai.usage.input_tokens": "120", "gen_ai.usage.output_tokens": "7", "gen_ai.request.max_tokens": "100", "gen_ai.request.temperature": 0.6, "agentworld.role": "world_model"} {
		if a[k] != want {
			t.Errorf("chat span %s = %v, want %v", k, a[k], want)
		}
	}
	if chat["kind"] != float64(3) || len(chat["traceId"].(string)) != 32 || len(chat["spanId"].(string)) != 16 {
		t.Errorf("chat span ids/kind: %v", chat)
	}
	judgeSpan := byName["chat judge-m"]
	if st := judgeSpan["status"].(map[string]any); st["code"] != float64(2) || attrs(judgeSpan)["error.type"] != "unavailable" {
		t.Errorf("failed judge call span: %v", judgeSpan)
	}
	step := byName["step terminal"]
	sa := attrs(step)
	if sa["agentworld.session"] != "s1" || sa["agentworld.turn"] != "3" || sa["agentworld.reward"] != 1.0 {
		t.Errorf("step span: %v", sa)
	}
	var start, end int64
	json.Unmarshal([]byte(step["startTimeUnixNano"].(string)), &start)
	json.Unmarshal([]byte(step["endTimeUnixNano"].(string)), &end)
	if time.Duration(end-start) != 250*time.Millisecond {
		t.Errorf("step span lasts %v, want the step's 250ms", time.Duration(end-start))
	}
}

func TestOffByDefault(t *testing.T) {
	var tr *Tracer
	c := fakeModel{}
	if got := tr.Completer(c, RoleJudge, "x"); got != worldmodel.Completer(c) {
		t.Error("a nil Tracer wraps the completer")
	}
	if tr.Observer(nil) != nil || tr.Close(context.Background()) != nil {
		t.Error("a nil Tracer observes or fails to close")
	}
	if _, err := New("localhost:4318", "x"); err == nil {
		t.Error("an endpoint without scheme is accepted")
	}
}
