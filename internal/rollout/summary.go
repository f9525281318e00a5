package rollout

import (
	"math"
	"sort"
)

// Summary is the group statistics of a run's episodes.
type Summary struct {
	Episodes int `json:"episodes"`
	// K is the group size pass@k is reported for.
	K          int     `json:"k"`
	RewardMean float64 `json:"reward_mean"`
	// PassAt1 and PassAtK average the groups' unbiased estimates. An
	// episode passes when the world's success rule fired
	// (reward_components.success > 0), or, in a world without one, when
	// its reward is positive.
	PassAt1 float64 `json:"pass_at_1"`
	PassAtK float64 `json:"pass_at_k"`
	// RealChecked counts episodes replayed in a real environment;
	// SimPassed those of them that passed in simulation, Deceived those
	// that passed in simulation and failed in reality. DeceivedRate is
	// Deceived / SimPassed (0 when none passed).
	RealChecked  int            `json:"real_checked,omitempty"`
	SimPassed    int            `json:"sim_passed,omitempty"`
	Deceived     int            `json:"deceived,omitempty"`
	DeceivedRate float64        `json:"deceived_rate,omitempty"`
	Groups       []GroupSummary `json:"groups"`
}

// GroupSummary describes one group.
type GroupSummary struct {
	GroupID    string  `json:"group_id"`
	TaskID     string  `json:"task_id"`
	N          int     `json:"n"`
	Passed     int     `json:"passed"`
	RewardMean float64 `json:"reward_mean"`
	// RewardStd is the population standard deviation: 0 means the group
	// gives GRPO no signal.
	RewardStd float64 `json:"reward_std"`
	RewardMin float64 `json:"reward_min"`
	RewardMax float64 `json:"reward_max"`
	PassAt1   float64 `json:"pass_at_1"`
	PassAtK   float64 `json:"pass_at_k"`
	// The real check's counts for this group's task (see Summary).
	RealChecked  int     `json:"real_checked,omitempty"`
	SimPassed    int     `json:"sim_passed,omitempty"`
	Deceived     int     `json:"deceived,omitempty"`
	DeceivedRate float64 `json:"deceived_rate,omitempty"`
}

func passed(r Row) bool {
	if v, ok := r.RewardComponents["success"]; ok {
		return v > 0
	}
	return r.Reward > 0
}

// passAt is the unbiased pass@k estimate for n samples of which c passed:
// 1 - C(n-c, k) / C(n, k).
func passAt(n, c, k int) float64 {
	if k > n {
		k = n
	}
	if n-c < k {
		return 1
	}
	p := 1.0
	for i := n - c + 1; i <= n; i++ {
		p *= 1 - float64(k)/float64(i)
	}
	return 1 - p
}

// Summarize computes group statistics; k is the group size pass@k uses.
func Summarize(rows []Row, k int) *Summary {
	by := map[string][]Row{}
	for _, r := range rows {
		by[r.GroupID] = append(by[r.GroupID], r)
	}
	s := &Summary{Episodes: len(rows), K: k, Groups: []GroupSummary{}}
	ids := make([]string, 0, len(by))
	for id := range by {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	total := 0.0
	for _, id := range ids {
		g := by[id]
		gs := GroupSummary{GroupID: id, TaskID: g[0].TaskID, N: len(g), RewardMin: math.Inf(1), RewardMax: math.Inf(-1)}
		sum := 0.0
		for _, r := range g {
			sum += r.Reward
			gs.RewardMin = min(gs.RewardMin, r.Reward)
			gs.RewardMax = max(gs.RewardMax, r.Reward)
			if passed(r) {
				gs.Passed++
			}
			if r.RealCheck != nil {
				gs.RealChecked++
				if passed(r) {
					gs.SimPassed++
				}
				if r.RealCheck.Deceived {
					gs.Deceived++
				}
			}
		}
		if gs.SimPassed > 0 {
			gs.DeceivedRate = float64(gs.Deceived) / float64(gs.SimPassed)
		}
		s.RealChecked += gs.RealChecked
		s.SimPassed += gs.SimPassed
		s.Deceived += gs.Deceived
		total += sum
		gs.RewardMean = sum / float64(len(g))
		v := 0.0
		for _, r := range g {
			v += (r.Reward - gs.RewardMean) * (r.Reward - gs.RewardMean)
		}
		gs.RewardStd = math.Sqrt(v / float64(len(g)))
		gs.PassAt1 = passAt(gs.N, gs.Passed, 1)
		gs.PassAtK = passAt(gs.N, gs.Passed, k)
		s.PassAt1 += gs.PassAt1
		s.PassAtK += gs.PassAtK
		s.Groups = append(s.Groups, gs)
	}
	if len(rows) > 0 {
		s.RewardMean = total / float64(len(rows))
	}
	if s.SimPassed > 0 {
		s.DeceivedRate = float64(s.Deceived) / float64(s.SimPassed)
	}
	if len(ids) > 0 {
		s.PassAt1 /= float64(len(ids))
		s.PassAtK /= float64(len(ids))
	}
	return s
}
