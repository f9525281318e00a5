package score

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

// fig is a figure type as the benchmark's: NaN is written as null.
type fig float64

func (f fig) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(f), 'g', -1, 64), nil
}

func TestIntervalJSON(t *testing.T) {
	nan := fig(math.NaN())
	tests := []struct {
		iv   Interval[fig]
		want string
	}{
		{Interval[fig]{1.5, 2.25}, "[1.5,2.25]"},
		{Interval[fig]{nan, nan}, "null"},
		{Interval[fig]{nan, 3}, "null"},
		{Interval[fig]{3, nan}, "null"},
	}
	for _, tt := range tests {
		b, err := json.Marshal(struct {
			CI Interval[fig] `json:"ci95"`
		}{tt.iv})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(b), `{"ci95":`+tt.want+`}`; got != want {
			t.Errorf("%v: %s, want %s", tt.iv, got, want)
		}
		var back Interval[fig]
		if err := json.Unmarshal([]byte(tt.want), &back); err != nil {
			t.Fatal(err)
		}
		if back.Known() != tt.iv.Known() || (back.Known() && back != tt.iv) {
			t.Errorf("%s read back as %v", tt.want, back)
		}
	}
}
