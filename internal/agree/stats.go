// Package agree measures how far a benchmark's judges can be trusted: how
// the rankings of models agree between judges (Spearman's ρ and Kendall's
// τ-b with bootstrap intervals), how per-sample scores correlate, how often
// a judge's answer cannot be parsed, whether a judge shares a family with
// the model it judges, and how judges agree with people (quadratic-weighted
// Cohen's κ and Krippendorff's α against human labels).
//
// It works on plain [Sample] and [Label] values, so it knows nothing of run
// directories or databases: the benchmark converts its rows into samples and
// the label store supplies labels.
package agree

import (
	"math"
	"sort"
)

// Ranks returns the 1-based ranks of xs in ascending order, ties given the
// mean of the ranks they span (the "average" method scipy uses).
func Ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })
	r := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && xs[idx[j+1]] == xs[idx[i]] {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
		}
		i = j + 1
	}
	return r
}

// Pearson is the product-moment correlation of x and y; NaN when fewer than
// two pairs or either side is constant.
func Pearson(x, y []float64) float64 {
	n := len(x)
	if n < 2 || len(y) != n {
		return math.NaN()
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= float64(n)
	my /= float64(n)
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}

// Spearman is Spearman's ρ: the Pearson correlation of the average ranks.
func Spearman(x, y []float64) float64 {
	if len(x) != len(y) {
		return math.NaN()
	}
	return Pearson(Ranks(x), Ranks(y))
}

// KendallTauB is Kendall's τ-b, which corrects for ties on either side:
// (concordant − discordant) / √((n₀ − n₁)(n₀ − n₂)), n₀ the pairs, n₁ and
// n₂ the pairs tied in x and in y. NaN when fewer than two pairs or either
// side is constant. It counts pairs directly (O(n²)): meant for rankings of
// models, not for every sample.
func KendallTauB(x, y []float64) float64 {
	n := len(x)
	if n < 2 || len(y) != n {
		return math.NaN()
	}
	var conc, disc, tx, ty float64
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			dx, dy := x[i]-x[j], y[i]-y[j]
			switch {
			case dx == 0 && dy == 0:
				tx++
				ty++
			case dx == 0:
				tx++
			case dy == 0:
				ty++
			case (dx > 0) == (dy > 0):
				conc++
			default:
				disc++
			}
		}
	}
	n0 := float64(n*(n-1)) / 2
	den := math.Sqrt((n0 - tx) * (n0 - ty))
	if den == 0 {
		return math.NaN()
	}
	return (conc - disc) / den
}

// QuadraticKappa is Cohen's κ with quadratic weights between two raters'
// integer ratings of the same units (a[i] and b[i] rate unit i): one minus
// the ratio of weighted observed to weighted chance disagreement, the
// weight of ratings i and j being (i−j)². Categories span the smallest to
// the largest rating seen. NaN when there are no units or chance
// disagreement is zero (both raters always give one same rating).
func QuadraticKappa(a, b []int) float64 {
	if len(a) == 0 || len(a) != len(b) {
		return math.NaN()
	}
	lo, hi := a[0], a[0]
	for i := range a {
		lo, hi = min(lo, a[i], b[i]), max(hi, a[i], b[i])
	}
	k := hi - lo + 1
	obs := make([]float64, k*k)
	ra, rb := make([]float64, k), make([]float64, k)
	for i := range a {
		obs[(a[i]-lo)*k+(b[i]-lo)]++
		ra[a[i]-lo]++
		rb[b[i]-lo]++
	}
	n := float64(len(a))
	var wo, we float64
	for i := 0; i < k; i++ {
		for j := 0; j < k; j++ {
			w := float64((i - j) * (i - j))
			wo += w * obs[i*k+j]
			we += w * ra[i] * rb[j] / n
		}
	}
	if we == 0 {
		return math.NaN()
	}
	return 1 - wo/we
}

// Level is the measurement level of Krippendorff's α: which difference
// function compares two values.
type Level string

// The levels [KrippendorffAlpha] knows. Rubric scores 1..5 are ordinal; the
// interval level also treats the steps between them as equal.
const (
	Interval Level = "interval"
	Ordinal  Level = "ordinal"
)

// KrippendorffAlpha is Krippendorff's α for units each holding the values
// the coders gave it (any number of coders per unit; units with fewer than
// two values are not pairable and are left out), at the given level:
// 1 − (n−1)·Σ o_ck δ²_ck / Σ n_c n_k δ²_ck over the coincidence matrix o,
// n_c the pairable values of c, n their total. NaN when fewer than two
// pairable values or no expected disagreement.
func KrippendorffAlpha(units [][]int, level Level) float64 {
	vals := map[int]bool{}
	for _, u := range units {
		if len(u) < 2 {
			continue
		}
		for _, v := range u {
			vals[v] = true
		}
	}
	cats := make([]int, 0, len(vals))
	for v := range vals {
		cats = append(cats, v)
	}
	sort.Ints(cats)
	k := len(cats)
	if k == 0 {
		return math.NaN()
	}
	at := make(map[int]int, k)
	for i, c := range cats {
		at[c] = i
	}
	o := make([]float64, k*k)
	for _, u := range units {
		m := len(u)
		if m < 2 {
			continue
		}
		for i := range u {
			for j := range u {
				if i != j {
					o[at[u[i]]*k+at[u[j]]] += 1 / float64(m-1)
				}
			}
		}
	}
	nc := make([]float64, k)
	var n float64
	for c := 0; c < k; c++ {
		for d := 0; d < k; d++ {
			nc[c] += o[c*k+d]
		}
		n += nc[c]
	}
	if n < 2 {
		return math.NaN()
	}
	delta := func(c, d int) float64 {
		switch level {
		case Ordinal:
			lo, hi := min(c, d), max(c, d)
			s := 0.0
			for g := lo; g <= hi; g++ {
				s += nc[g]
			}
			s -= (nc[c] + nc[d]) / 2
			return s * s
		default:
			x := float64(cats[c] - cats[d])
			return x * x
		}
	}
	var do, de float64
	for c := 0; c < k; c++ {
		for d := 0; d < k; d++ {
			if c == d {
				continue
			}
			w := delta(c, d)
			do += o[c*k+d] * w
			de += nc[c] * nc[d] * w
		}
	}
	if de == 0 {
		return math.NaN()
	}
	return 1 - (n-1)*do/de
}

// percentileCI returns the 2.5th and 97.5th percentiles of xs (NaN values
// dropped), interpolating linearly between order statistics; NaNs when
// nothing is left.
func percentileCI(xs []float64) [2]float64 {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return [2]float64{math.NaN(), math.NaN()}
	}
	sort.Float64s(v)
	at := func(p float64) float64 {
		pos := p / 100 * float64(len(v)-1)
		lo := int(math.Floor(pos))
		hi := min(lo+1, len(v)-1)
		return v[lo] + (pos-float64(lo))*(v[hi]-v[lo])
	}
	return [2]float64{at(2.5), at(97.5)}
}
