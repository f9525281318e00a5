package jsonappend

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// encoded is v as an Encoder without HTML escaping writes it, without
// the newline it ends with.
func encoded(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// FuzzString: String writes every string, valid UTF-8 or not, as
// encoding/json does, after whatever b holds.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\b\f\n\r\t\x00\x01\x1f\x7f", "<a href='x'>&amp;</a>", "é中🙂", "\u2028\u2029", "\xff\xfe", "a\xc3", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := append([]byte("prefix"), encoded(t, s)...)
		if got := String([]byte("prefix"), s); !bytes.Equal(got, want) {
			t.Fatalf("String(%q) = %s, encoding/json writes %s", s, got, want)
		}
	})
}

// FuzzFloat: Float writes every finite float64 as encoding/json does and
// refuses what encoding/json cannot encode.
func FuzzFloat(f *testing.F) {
	for _, v := range []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1.5, 1e-6, 9.99e-7, 1e-7, 1.234e-10, 1e20, 1e21, 1.7976931348623157e308, 5e-324, -2.5e-8, 123456789} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		got, ok := Float([]byte("x"), v)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			if ok || string(got) != "x" {
				t.Fatalf("Float(%v) = %s, %v; want it refused", v, got, ok)
			}
			return
		}
		if want := append([]byte("x"), encoded(t, v)...); !ok || !bytes.Equal(got, want) {
			t.Fatalf("Float(%v) = %s, %v; encoding/json writes %s", v, got, ok, want)
		}
	})
}

// TestFloatRefusesWhatJSONCannotHold: NaN and the infinities, which
// encoding/json reports as errors.
func TestFloatRefusesWhatJSONCannotHold(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := json.Marshal(v); err == nil {
			t.Fatalf("encoding/json encodes %v", v)
		}
		if b, ok := Float(nil, v); ok || len(b) != 0 {
			t.Errorf("Float(%v) = %s, %v", v, b, ok)
		}
	}
}
