package score

import "testing"

func TestTotal(t *testing.T) {
	tests := []struct {
		s    Scores
		want float64
	}{
		{Scores{}, 0},
		{Scores{Format: 5, Factuality: 4, Consistency: 3, Realism: 2, Quality: 1}, 3},
		{Scores{Format: 5, Quality: 4}, 4.5},
		{Scores{Format: -1, Quality: 4}, 4},
	}
	for _, tt := range tests {
		if got := tt.s.Total(); got != tt.want {
			t.Errorf("%+v.Total() = %v, want %v", tt.s, got, tt.want)
		}
	}
}
