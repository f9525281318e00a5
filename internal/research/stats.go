package research

import (
	"math"
	"sort"
)

// Bootstrap is the mean of diffs and its 95% percentile interval from
// resamples of the paired per-trajectory differences. Resampling whole
// trajectories keeps their turns' correlation inside each draw.
func Bootstrap(diffs []float64, resamples int, seed uint64) (meanDiff, lo, hi float64) {
	if len(diffs) == 0 {
		return 0, 0, 0
	}
	sum := 0.0
	for _, d := range diffs {
		sum += d
	}
	meanDiff = sum / float64(len(diffs))
	r := rng(seed, "bootstrap", 0)
	means := make([]float64, resamples)
	for k := range means {
		s := 0.0
		for range diffs {
			s += diffs[r.IntN(len(diffs))]
		}
		means[k] = s / float64(len(diffs))
	}
	sort.Float64s(means)
	return meanDiff, quantile(means, 0.025), quantile(means, 0.975)
}

func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	i := int(math.Floor(pos))
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}

// SignTest counts wins, losses and ties of diffs and the two-sided exact
// binomial p-value of the wins among the non-tied pairs under p=½.
func SignTest(diffs []float64) (wins, losses, ties int, p float64) {
	for _, d := range diffs {
		switch {
		case d > 0:
			wins++
		case d < 0:
			losses++
		default:
			ties++
		}
	}
	n := wins + losses
	if n == 0 {
		return wins, losses, ties, 1
	}
	k := min(wins, losses)
	// P(X <= k) for X ~ Binomial(n, ½), doubled, via log-gamma to stay
	// finite for large n.
	tail := 0.0
	for i := 0; i <= k; i++ {
		lg := lgamma(n+1) - lgamma(i+1) - lgamma(n-i+1) - float64(n)*math.Ln2
		tail += math.Exp(lg)
	}
	return wins, losses, ties, math.Min(1, 2*tail)
}

func lgamma(x int) float64 {
	v, _ := math.Lgamma(float64(x))
	return v
}
