package ui

import (
	"errors"
	"net/url"
	"testing"
)

// FuzzQueryOf feeds request query strings to the filter parser: it never
// panics, and what it refuses is a bad request naming the field.
func FuzzQueryOf(f *testing.F) {
	for _, s := range []string{"", "page=2&min=1.5&max=4", "page=0", "min=NaN", "max=x&domain=web&cat=truncated&q=ls&sort=-delta", "page=99999999999999999999", "page=9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := queryOf(v, DefaultPageSize)
		if err != nil {
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("%q: %v is not a bad request", raw, err)
			}
			return
		}
		if q.Offset < 0 || q.Limit != DefaultPageSize {
			t.Fatalf("%q: offset %d limit %d", raw, q.Offset, q.Limit)
		}
	})
}

func TestLineDiffBounded(t *testing.T) {
	d, note := lineDiff("a\nb\nc", "a\nx\nc")
	if len(d) != 4 || note != "" {
		t.Errorf("diff = %+v %q", d, note)
	}
	long := make([]byte, 0, 6000)
	for range 3000 {
		long = append(long, 'x', '\n')
	}
	if d, note := lineDiff(string(long), string(long)); d != nil || note == "" {
		t.Error("a diff past the bound was computed")
	}
}
