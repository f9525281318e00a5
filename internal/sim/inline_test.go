package sim

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/fielderr"
)

// toolSpec is an inline MCP spec with n tools, each padded to about pad
// bytes of description.
func toolSpec(n, pad int) []byte {
	var b strings.Builder
	b.WriteString(`{"domain":"mcp","task_description":"a tracker","action_space":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"tool_%d","description":%q,"input_schema":{"type":"object"}}`, i, strings.Repeat("d", pad))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func TestInlineSpecBounds(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		raw   []byte
		field string // "" accepts
		kind  error
	}{
		{"small spec", Options{}, toolSpec(3, 10), "", nil},
		{"4.5 MB spec over the default byte limit", Options{}, toolSpec(4, 1_150_000), "world", ErrTooLarge},
		{"4.5 MB spec with no byte limit", Options{MaxInlineSpecBytes: -1}, toolSpec(4, 1_150_000), "", nil},
		{"one byte over a set limit", Options{MaxInlineSpecBytes: len(toolSpec(3, 10)) - 1}, toolSpec(3, 10), "world", ErrTooLarge},
		{"exactly a set limit", Options{MaxInlineSpecBytes: len(toolSpec(3, 10))}, toolSpec(3, 10), "", nil},
		{"tools over the default", Options{}, toolSpec(DefaultMaxInlineTools+1, 0), "world.action_space.tools", ErrTooLarge},
		{"tools at a set limit", Options{MaxInlineTools: 3}, toolSpec(3, 0), "", nil},
		{"tools over a set limit", Options{MaxInlineTools: 3}, toolSpec(4, 0), "world.action_space.tools", ErrTooLarge},
		{"tools with no limit", Options{MaxInlineTools: -1}, toolSpec(DefaultMaxInlineTools+1, 0), "", nil},
		{"unknown field", Options{}, []byte(`{"domain":"os","task_description":"t","action_space":"a","colour":1}`), "world.colour", ErrBadRequest},
		{"bad domain", Options{}, []byte(`{"domain":"chess","task_description":"t","action_space":"a"}`), "world.domain", ErrBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(&tc.opts)
			defer m.Close(context.Background())
			spec, err := m.ParseInlineSpec(tc.raw)
			if tc.field == "" {
				if err != nil || spec == nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			fe, ok := fielderr.As(err)
			if !ok || fe.Path != tc.field || !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want a FieldError on %s wrapping %v", err, tc.field, tc.kind)
			}
		})
	}
}

// TestCreateBoundsInlineTools: an inline spec handed to Create in process
// (not through ParseInlineSpec) meets the same tool bound.
func TestCreateBoundsInlineTools(t *testing.T) {
	m := newTestManager(t, &scriptedModel{}, Options{MaxInlineTools: 2})
	spec, err := New(nil).ParseInlineSpec(toolSpec(3, 0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Create(context.Background(), CreateRequest{World: spec})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "world.action_space.tools") {
		t.Fatalf("create with 3 tools over a limit of 2: %v", err)
	}
}

// BenchmarkInlineSessionMemory reports the heap one session of an inline
// spec at the default byte limit holds, and what refusing a 4.5 MB spec
// costs:
//
//	go test ./internal/sim -run '^$' -bench InlineSessionMemory -benchtime 1x
func BenchmarkInlineSessionMemory(b *testing.B) {
	const sessions = 20
	raw := toolSpec(50, DefaultMaxInlineSpecBytes/50-120)
	big := toolSpec(4, 1_150_000)
	var perSession float64
	for b.Loop() {
		m := New(&Options{Backends: map[string]BackendFactory{BackendModel: NewModelBackend(&scriptedModel{}, nil)}})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range sessions {
			spec, err := m.ParseInlineSpec(raw)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := m.Create(context.Background(), CreateRequest{World: spec}); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perSession = float64(after.HeapAlloc-before.HeapAlloc) / sessions
		runtime.KeepAlive(m)
		_ = m.Close(context.Background())
	}
	m := New(nil)
	const refusals = 1000
	start := time.Now()
	for range refusals {
		if _, err := m.ParseInlineSpec(big); !errors.Is(err, ErrTooLarge) {
			b.Fatal(err)
		}
	}
	refuse := time.Since(start) / refusals
	b.ReportMetric(float64(len(raw))/1e6, "spec-MB")
	b.ReportMetric(perSession/1e6, "heap-MB/session")
	b.ReportMetric(perSession/float64(len(raw)), "heap/spec-bytes")
	b.ReportMetric(float64(refuse.Nanoseconds()), "refuse-4.5MB-ns")
}
