package worldmodel

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	date := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name     string
		header   map[string]string
		n        int
		lo, hi   time.Duration
		wantWait bool
	}{
		{"first backoff", nil, 0, 375 * time.Millisecond, 500 * time.Millisecond, true},
		{"third backoff", nil, 2, 1500 * time.Millisecond, 2 * time.Second, true},
		{"capped backoff", nil, 10, 6 * time.Second, 8 * time.Second, true},
		{"milliseconds win", map[string]string{"Retry-After-Ms": "250", "Retry-After": "5"}, 0, 250 * time.Millisecond, 250 * time.Millisecond, true},
		{"seconds", map[string]string{"Retry-After": "2.5"}, 3, 2500 * time.Millisecond, 2500 * time.Millisecond, true},
		{"http date", map[string]string{"Retry-After": date}, 0, 28 * time.Second, 30 * time.Second, true},
		{"a minute", map[string]string{"Retry-After": "60"}, 0, time.Minute, time.Minute, true},
		{"over a minute", map[string]string{"Retry-After": "61"}, 0, 61 * time.Second, 61 * time.Second, false},
		{"huge", map[string]string{"Retry-After": "1e300"}, 0, 0, 1<<63 - 1, false},
		{"garbage falls back to backoff", map[string]string{"Retry-After": "soon", "Retry-After-Ms": "NaN"}, 0, 375 * time.Millisecond, 500 * time.Millisecond, true},
		{"negative falls back to backoff", map[string]string{"Retry-After": "-3"}, 0, 375 * time.Millisecond, 500 * time.Millisecond, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			for range 20 { // the jitter is random: every draw must be in range
				d, ok := retryDelay(h, tc.n, 8*time.Second)
				if ok != tc.wantWait || d < tc.lo || d > tc.hi {
					t.Fatalf("retryDelay = %s, %v; want %v in [%s, %s]", d, ok, tc.wantWait, tc.lo, tc.hi)
				}
			}
		})
	}
}

func TestAttemptRetryable(t *testing.T) {
	cases := []struct {
		name string
		a    attempt
		want bool
	}{
		{"transport error", attempt{err: http.ErrHandlerTimeout}, true},
		{"too large", attempt{err: tooLarge(10)}, false},
		{"429", attempt{status: 429}, true},
		{"408", attempt{status: 408}, true},
		{"409", attempt{status: 409}, true},
		{"500", attempt{status: 500}, true},
		{"400", attempt{status: 400}, false},
		{"200", attempt{status: 200}, false},
		{"server says retry", attempt{status: 400, header: http.Header{"X-Should-Retry": {"true"}}}, true},
		{"server says do not", attempt{status: 503, header: http.Header{"X-Should-Retry": {"false"}}}, false},
		{"an answer is never retried", attempt{status: 200, header: http.Header{"X-Should-Retry": {"true"}}}, false},
	}
	for _, tc := range cases {
		if got := tc.a.retryable(); got != tc.want {
			t.Errorf("%s: retryable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
