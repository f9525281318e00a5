package rollout

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestSummarize: the running per-group sums give the statistics a direct
// computation over the rows gives; a group of equal rewards has a spread of
// exactly 0 (no GRPO signal), whatever the rounding of its sums.
func TestSummarize(t *testing.T) {
	row := func(g string, reward float64, success *float64, deceived *bool) Row {
		r := Row{GroupID: g, TaskID: "task-" + g, Reward: reward, RewardComponents: map[string]float64{}}
		if success != nil {
			r.RewardComponents["success"] = *success
		}
		if deceived != nil {
			r.RealCheck = &RealCheck{Deceived: *deceived}
		}
		return r
	}
	one, zero, yes, no := 1.0, 0.0, true, false
	rows := []Row{
		// a: constant 0.3, no success rule (passes on positive reward).
		row("a", 0.3, nil, nil), row("a", 0.3, nil, nil), row("a", 0.3, nil, nil),
		// b: the success rule decides, real checks on all three.
		row("b", 1, &one, &yes), row("b", -0.5, &zero, &no), row("b", 0.5, &one, &no),
	}
	got := Summarize(rows, 2)
	bMean := (1 - 0.5 + 0.5) / 3.0
	bStd := math.Sqrt(((1-bMean)*(1-bMean) + (-0.5-bMean)*(-0.5-bMean) + (0.5-bMean)*(0.5-bMean)) / 3)
	want := &Summary{
		Episodes: 6, K: 2, RewardMean: (0.9 + 1) / 6,
		PassAt1: (1 + 2.0/3) / 2, PassAtK: 1,
		RealChecked: 3, SimPassed: 2, Deceived: 1, DeceivedRate: 0.5,
		SignalGroups: 1, // a's rewards are all equal: no signal
		Groups: []GroupSummary{
			{GroupID: "a", TaskID: "task-a", N: 3, Passed: 3, RewardMean: 0.3, RewardStd: 0, RewardMin: 0.3, RewardMax: 0.3, PassAt1: 1, PassAtK: 1},
			{GroupID: "b", TaskID: "task-b", N: 3, Passed: 2, RewardMean: bMean, RewardStd: bStd, RewardMin: -0.5, RewardMax: 1, PassAt1: 2.0 / 3, PassAtK: 1,
				RealChecked: 3, SimPassed: 2, Deceived: 1, DeceivedRate: 0.5},
		},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got.Groups[0].RewardStd != 0 {
		t.Errorf("constant group's spread %g, want exactly 0", got.Groups[0].RewardStd)
	}
}
