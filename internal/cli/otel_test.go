package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestBenchRunOTel runs the quickstart with --otel-endpoint pointed at an
// OTLP HTTP receiver: every model call arrives as a GenAI chat span.
func TestBenchRunOTel(t *testing.T) {
	var mu sync.Mutex
	names := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []struct {
						Name string `json:"name"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/traces" || json.Unmarshal(b, &body) != nil {
			http.Error(w, "bad", 400)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range body.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names[s.Name]++
				}
			}
		}
	}))
	defer srv.Close()
	out := filepath.Join(t.TempDir(), "run")
	_, stderr, err := runCLI(t, "bench", "run", "--data", "../../examples/bench", "--model-url", "baseline:copy", "--judge", "rules", "--out", out, "--otel-endpoint", srv.URL)
	if err != nil {
		t.Fatalf("bench run: %v\n%s", err, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for n, c := range names {
		if !strings.HasPrefix(n, "chat ") {
			t.Errorf("unexpected span %q", n)
		}
		total += c
	}
	if total != 25 {
		t.Errorf("received %d chat spans, want one per sample (25): %v", total, names)
	}
	if _, _, err := runCLI(t, "bench", "run", "--data", "../../examples/bench", "--model-url", "baseline:copy", "--judge", "rules", "--out", out+"2", "--otel-endpoint", "localhost:4318"); err == nil || !strings.Contains(err.Error(), "--otel-endpoint") {
		t.Errorf("bad endpoint: %v", err)
	}
}
