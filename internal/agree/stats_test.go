package agree

import (
	"math"
	"testing"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-want) > tol {
		t.Errorf("%s = %.10g, want %.10g (±%g)", what, got, want, tol)
	}
}

// The expected values were computed with scipy.stats (spearmanr,
// kendalltau, whose default is τ-b, pearsonr) and scikit-learn's
// cohen_kappa_score(weights="quadratic") on the same vectors.
func TestCorrelationsMatchScipy(t *testing.T) {
	x := []float64{1, 2, 2, 3, 5, 4, 4, 6}
	y := []float64{2, 1, 3, 3, 4, 4, 6, 5}
	near(t, "spearman", Spearman(x, y), scipySpearman, 1e-12)
	near(t, "kendall τ-b", KendallTauB(x, y), scipyKendall, 1e-12)
	near(t, "pearson", Pearson(x, y), scipyPearson, 1e-12)
}

func TestRankCorrelationOfKnownRankings(t *testing.T) {
	// Two rankings of five models that swap the 3rd and 4th: by hand,
	// ρ = 1 − 6·Σd²/(n(n²−1)) = 1 − 6·2/120 = 0.9 and τ = (9 − 1)/10 = 0.8.
	a := []float64{90, 70, 60, 40, 20}
	b := []float64{85, 75, 30, 45, 10}
	near(t, "spearman", Spearman(a, b), 0.9, 1e-12)
	near(t, "kendall", KendallTauB(a, b), 0.8, 1e-12)
	// Reversed rankings: −1 for both.
	near(t, "spearman reversed", Spearman(a, []float64{1, 2, 3, 4, 5}), -1, 1e-12)
	near(t, "kendall reversed", KendallTauB(a, []float64{1, 2, 3, 4, 5}), -1, 1e-12)
	if v := Spearman([]float64{1, 1, 1}, []float64{1, 2, 3}); !math.IsNaN(v) {
		t.Errorf("constant side: ρ = %v, want NaN", v)
	}
}

func TestRanksAverageTies(t *testing.T) {
	got := Ranks([]float64{10, 20, 20, 5, 20})
	want := []float64{2, 4, 4, 1, 4}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Ranks = %v, want %v", got, want)
		}
	}
}

func TestQuadraticKappaMatchesSklearn(t *testing.T) {
	a := []int{1, 2, 3, 4, 5, 3, 2, 4, 5, 1, 3, 3}
	b := []int{1, 3, 3, 4, 4, 2, 2, 5, 5, 2, 3, 4}
	near(t, "κ", QuadraticKappa(a, b), sklearnKappa, 1e-12)
	near(t, "κ identical", QuadraticKappa(a, a), 1, 1e-12)
	if v := QuadraticKappa([]int{3, 3}, []int{3, 3}); !math.IsNaN(v) {
		t.Errorf("no variation: κ = %v, want NaN", v)
	}
}

// Krippendorff's worked example (reliability data of four coders on twelve
// units, with missing values; "Computing Krippendorff's Alpha-Reliability",
// 2011): α is 0.849 at the interval level and 0.815 at the ordinal level.
func TestKrippendorffWorkedExample(t *testing.T) {
	units := [][]int{
		{1, 1, 1}, {2, 2, 3, 2}, {3, 3, 3, 3}, {3, 3, 3, 3}, {2, 2, 2, 2}, {1, 2, 3, 4},
		{4, 4, 4, 4}, {1, 1, 2, 1}, {2, 2, 2, 2}, {5, 5, 5}, {1, 1}, {3},
	}
	near(t, "α interval", KrippendorffAlpha(units, Interval), 0.849, 0.0005)
	near(t, "α ordinal", KrippendorffAlpha(units, Ordinal), 0.815, 0.0005)
}

func TestPercentileCI(t *testing.T) {
	ci := percentileCI([]float64{math.NaN(), 1, 2, 3, 4, 5})
	near(t, "lo", ci[0], 1.1, 1e-12)
	near(t, "hi", ci[1], 4.9, 1e-12)
}

// Values printed by scipy 1.10.1 and scikit-learn for the vectors of
// TestCorrelationsMatchScipy and TestQuadraticKappaMatchesSklearn.
const (
	scipySpearman = 0.8292682926829269
	scipyKendall  = 0.6923076923076924
	scipyPearson  = 0.7666165328608728
	sklearnKappa  = 0.8421052631578947
)
