package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the ticker's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTickerPrintsLinesAndAFinalOne: off a terminal the line is printed
// as plain lines every interval and once more at Stop; Stop twice is fine.
func TestTickerPrintsLinesAndAFinalOne(t *testing.T) {
	var buf syncBuffer
	var mu sync.Mutex
	n := 0
	tk := Start(&buf, time.Millisecond, func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return "step"
	})
	deadline := time.Now().Add(time.Minute)
	for strings.Count(buf.String(), "step\n") < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	tk.Stop()
	tk.Stop()
	got := buf.String()
	mu.Lock()
	calls := n
	mu.Unlock()
	if strings.Count(got, "step\n") != calls || calls < 4 || strings.Contains(got, "\r") {
		t.Errorf("%d calls wrote %q; want one plain line per call, at least 3 ticks and the final line", calls, got)
	}
	Start(nil, 0, func() string { t.Fatal("line called without a writer"); return "" }).Stop()
}

func TestRate(t *testing.T) {
	for _, tc := range []struct {
		done, resumed, total int64
		ago                  time.Duration
		wantRate             float64
		wantETA              string
	}{
		{done: 30, resumed: 10, total: 120, ago: 10 * time.Second, wantRate: 2, wantETA: "45s"},
		{done: 10, resumed: 10, total: 120, ago: 10 * time.Second, wantRate: 0, wantETA: "?"},
		{done: 130, resumed: 0, total: 120, ago: 10 * time.Second, wantRate: 13, wantETA: "?"},
	} {
		rate, eta := Rate(tc.done, tc.resumed, tc.total, time.Now().Add(-tc.ago))
		if rate < tc.wantRate*0.99 || rate > tc.wantRate*1.01 || eta != tc.wantETA {
			t.Errorf("Rate(%d, %d, %d, %v ago) = %.3f, %q; want %.3f, %q", tc.done, tc.resumed, tc.total, tc.ago, rate, eta, tc.wantRate, tc.wantETA)
		}
	}
}
