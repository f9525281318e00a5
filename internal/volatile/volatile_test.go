package volatile

import "testing"

func TestDeterministic(t *testing.T) {
	tests := []struct{ in, want string }{
		{"**Environment Observation:**\nls  \r\nfoo\n\n", "ls\nfoo"},
		{"built at 2026-11-29T17:03:14Z in 35ms", "built at <datetime> in <duration>"},
		{"-rw-r--r-- 1 root root 3 Nov 29 17:03 a.txt", "-rw-r--r-- 1 root root 3 <date> a.txt"},
		{"commit 9b53109a1c2d3e4f5a6b7c8d9e0f", "commit <hex>"},
		{"id 123e4567-e89b-12d3-a456-426614174000 at 10:11:12", "id <uuid> at <time>"},
		{"id deadbeef-cafe-babe-face-feedfacecafe", "id <uuid>"},
		{"hash abcdefabcdefab", "hash <hex>"},
		{"real\t0m1.250s", "real\t0m1.<duration>"}, // the duration pattern wins over the "real" one
		{"\n\n  \nplain words only\n \n", "plain words only"},
	}
	for _, tt := range tests {
		if got := Deterministic(tt.in); got != tt.want {
			t.Errorf("Deterministic(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"done in 35ms\n$ ", "done in 120ms\n$", true},
		{"**Environment Observation:**\nok", "ok\n\n", true},
		{"built 2026-11-29T17:03:14Z", "built 2025-01-02 08:00", true},
		{"3 files", "4 files", false},
		{"a\nb", "a", false},
		{"", "", true},
	}
	for _, tt := range tests {
		if got := Equal(tt.a, tt.b); got != tt.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// FuzzEqual checks that the line-wise shortcut of Equal and the pre-check of
// MaskLine agree with the plain definition on arbitrary text.
func FuzzEqual(f *testing.F) {
	f.Add("done in 35ms\n$ ", "done in 120ms\n$")
	f.Add("id deadbeef-cafe-babe-face-feedfacecafe", "id 123e4567-e89b-12d3-a456-426614174000")
	f.Add("Tue Nov 29 10:00:01", "Mon Jan  2 09:09:09")
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := Equal(a, b), Deterministic(a) == Deterministic(b); got != want {
			t.Errorf("Equal(%q, %q) = %v, Deterministic says %v", a, b, got, want)
		}
		for _, l := range []string{a, b} {
			full := l
			for _, p := range patterns {
				full = p.re.ReplaceAllString(full, p.repl)
			}
			if got := MaskLine(l); got != full {
				t.Errorf("MaskLine(%q) = %q, the patterns give %q", l, got, full)
			}
		}
	})
}
