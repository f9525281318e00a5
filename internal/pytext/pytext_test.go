package pytext

import "testing"

func TestStripMatchesPython(t *testing.T) {
	// Expected values are what Python 3's str.strip() returns.
	tests := []struct{ in, want string }{
		{"", ""},
		{"  a b  ", "a b"},
		{"\x1c\x1d x \x1e\x1f", "x"}, // information separators count as space in Python, not in Go
		{"\u00a0\u2028y\u3000", "y"},
		{"\u200bz\u200b", "\u200bz\u200b"}, // zero-width space is not whitespace in Python
		{"\t\n\v\f\r", ""},
	}
	for _, tt := range tests {
		if got := Strip(tt.in); got != tt.want {
			t.Errorf("Strip(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRoundHalfEvenMatchesPython(t *testing.T) {
	// Python 3: round(0.5) == 0, round(1.5) == 2, round(2.5) == 2, round(-0.5) == 0.
	tests := []struct{ in, want float64 }{{0.5, 0}, {1.5, 2}, {2.5, 2}, {3.5, 4}, {-0.5, 0}, {4.4, 4}, {4.6, 5}}
	for _, tt := range tests {
		if got := RoundHalfEven(tt.in); got != tt.want {
			t.Errorf("RoundHalfEven(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
