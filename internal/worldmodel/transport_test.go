package worldmodel

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
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

// TestReadCapped reads bodies at and around the cap, declared or not, in
// one piece or a byte at a time, into memory too small or large enough.
func TestReadCapped(t *testing.T) {
	body := strings.Repeat("0123456789", 100) // 1000 bytes
	cases := []struct {
		name     string
		limit    int64
		declared int64
		buf      []byte
		tooLarge bool
	}{
		{"undeclared", 1000, 0, nil, false},
		{"declared", 1000, 1000, nil, false},
		{"declared into a buffer large enough", 1000, 1000, make([]byte, 7, 1001), false},
		{"declared into a buffer too small", 1000, 1000, make([]byte, 0, 1000), false},
		{"undeclared into a small buffer", 1000, 0, make([]byte, 3, 16), false},
		{"undeclared over the cap", 999, 0, nil, true},
		{"declared short of the body", 999, 10, nil, true},
		{"declared over the cap", 999, 1000, nil, true},
	}
	for _, tc := range cases {
		for _, oneByte := range []bool{false, true} {
			var r io.Reader = strings.NewReader(body)
			if oneByte {
				r = iotest.OneByteReader(r)
			}
			got, err := readCapped(r, tc.limit, tc.declared, tc.buf)
			if tc.tooLarge {
				if !errors.Is(err, ErrResponseTooLarge) {
					t.Errorf("%s (one byte a read %v): err %v, want ErrResponseTooLarge", tc.name, oneByte, err)
				}
				continue
			}
			if err != nil || string(got) != body {
				t.Errorf("%s (one byte a read %v): %d bytes, %v; want the body", tc.name, oneByte, len(got), err)
			}
			if cap(tc.buf) > len(body) && &got[0] != &tc.buf[:1][0] {
				t.Errorf("%s: did not read into the buffer given", tc.name)
			}
		}
	}
	failing := iotest.DataErrReader(iotest.TimeoutReader(strings.NewReader(body)))
	if _, err := readCapped(failing, 1<<20, 0, nil); !errors.Is(err, iotest.ErrTimeout) {
		t.Errorf("a failing read: err %v, want it passed on", err)
	}
}
