package volatile

import (
	"strings"
	"testing"
)

func TestDeterministic(t *testing.T) {
	tests := []struct{ in, want string }{
		{"**Environment Observation:**\nls  \r\nfoo\n\n", "ls\nfoo"},
		{"built at 2026-11-29T17:03:14Z in 35ms", "built at <datetime> in <duration>"},
		{"-rw-r--r-- 1 root root 3 Nov 29 17:03 a.txt", "-rw-r--r-- 1 root root 3 <date> a.txt"},
		{"commit 9b53109a1c2d3e4f5a6b7c8d9e0f", "commit <hex>"},
		{"id 123e4567-e89b-12d3-a456-426614174000 at 10:11:12", "id <uuid> at <time>"},
		{"id deadbeef-cafe-babe-face-feedfacecafe", "id <uuid>"},
		{"hash abcdefabcdefab", "hash <hex>"},
		{"real\t0m1.250s", "real <duration>"},
		{"Nov 29 17:03:14 host sshd[12]: ok", "Nov 29 <time> host sshd[12]: ok"},
		{"Tue Nov  5 09:00:01 UTC 2026", "<date> <time> UTC 2026"},
		{"at 2026-11-29 08:15 and 2026-11-29T08:15:01.123+01:00 and 2026-11-29T08:15:01-0500", "at <datetime> and <datetime> and <datetime>"},
		{"1.5s 35ms 2msx 7.25ms 12s3", "<duration> <duration> 2msx <duration> 12s3"},
		{"10:11:12.5s", "<time>.<duration>"},
		{"123:45:67 1:02:03 1:02:033 v10:11:12", "123:45:67 <time> 1:02:033 v10:11:12"},
		{"abcdef012345 ABCDEF012345 abcdef01234 " + strings.Repeat("a", 65), "<hex> ABCDEF012345 abcdef01234 " + strings.Repeat("a", 65)},
		{"123456789012s", "<duration>"},
		{"x-123e4567-e89b-12d3-a456-426614174000x", "x-123e4567-e89b-12d3-a456-426614174000x"},
		{"drwxr-xr-x 2 root root 4096 Jan  3  2025 bin", "drwxr-xr-x 2 root root 4096 <date> bin"},
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

// FuzzEqual checks that Equal's line-wise shortcut agrees with the plain
// definition, that masking is idempotent and only touches lines that can
// hold a volatile value.
func FuzzEqual(f *testing.F) {
	f.Add("done in 35ms\n$ ", "done in 120ms\n$")
	f.Add("id deadbeef-cafe-babe-face-feedfacecafe", "id 123e4567-e89b-12d3-a456-426614174000")
	f.Add("Tue Nov 29 10:00:01", "Mon Jan  2 09:09:09")
	f.Add("real 0m1.5s 2026-01-02T03:04:05Z", "Nov 29 2026")
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := Equal(a, b), Deterministic(a) == Deterministic(b); got != want {
			t.Errorf("Equal(%q, %q) = %v, Deterministic says %v", a, b, got, want)
		}
		for _, l := range []string{a, b} {
			m := MaskLine(l)
			if again := MaskLine(m); again != m {
				t.Errorf("MaskLine(%q) = %q, masked again %q", l, m, again)
			}
			if !mayHoldVolatile(l) && m != l {
				t.Errorf("MaskLine(%q) changed a line without digits or hex runs: %q", l, m)
			}
		}
	})
}
