package score

import (
	"encoding/json"
	"math"
)

// Interval is a 95% confidence interval over figures of type N, a float
// type whose JSON writes NaN as null. Its JSON is [low, high], or null when
// a bound is unknown (a domain with a single trajectory, a statistic with
// no pairs), never [null, null]: a reader tells "no interval" from an
// interval with one check, as it does for a mean with no sample behind it.
// The benchmark, judge agreement and the run viewer all write intervals
// this way.
type Interval[N ~float64] [2]N

// Known reports whether both bounds are numbers.
func (iv Interval[N]) Known() bool {
	return !math.IsNaN(float64(iv[0])) && !math.IsNaN(float64(iv[1]))
}

// MarshalJSON writes [low, high] with N's own JSON, or null when not known.
func (iv Interval[N]) MarshalJSON() ([]byte, error) {
	if !iv.Known() {
		return []byte("null"), nil
	}
	return json.Marshal([2]N(iv))
}

// UnmarshalJSON reads [low, high] or null (both bounds NaN).
func (iv *Interval[N]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*iv = Interval[N]{N(math.NaN()), N(math.NaN())}
		return nil
	}
	var v [2]N
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*iv = Interval[N](v)
	return nil
}
