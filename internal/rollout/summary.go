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
	RealChecked  int     `json:"real_checked,omitempty"`
	SimPassed    int     `json:"sim_passed,omitempty"`
	Deceived     int     `json:"deceived,omitempty"`
	DeceivedRate float64 `json:"deceived_rate,omitempty"`
	// SignalGroups counts the groups whose rewards differ (reward_std >
	// 0): only those give GRPO a learning signal.
	SignalGroups int            `json:"signal_groups"`
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
	return outcomeOf(r).passed()
}

// outcome is what the statistics read of a row; a journal line decodes
// into it without its messages and turns being kept.
type outcome struct {
	GroupID          string  `json:"group_id"`
	TaskID           string  `json:"task_id"`
	Reward           float64 `json:"reward"`
	RewardComponents struct {
		// Success is the world's success rule's component; nil when the
		// world has none.
		Success *float64 `json:"success"`
	} `json:"reward_components"`
	RealCheck *struct {
		Deceived bool `json:"deceived"`
	} `json:"real_check"`
}

func outcomeOf(r Row) outcome {
	o := outcome{GroupID: r.GroupID, TaskID: r.TaskID, Reward: r.Reward}
	if v, ok := r.RewardComponents["success"]; ok {
		o.RewardComponents.Success = &v
	}
	if r.RealCheck != nil {
		o.RealCheck = &struct {
			Deceived bool `json:"deceived"`
		}{r.RealCheck.Deceived}
	}
	return o
}

func (o outcome) passed() bool {
	if o.RewardComponents.Success != nil {
		return *o.RewardComponents.Success > 0
	}
	return o.Reward > 0
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

// summarizer accumulates the statistics episode by episode, holding one
// tally per group and nothing per episode, so a run's summary costs no
// memory per row and no second pass over its journal.
type summarizer struct {
	k      int
	groups map[string]*tally
}

// tally is one group's running sums.
type tally struct {
	gs         GroupSummary
	sum, sumSq float64
}

func newSummarizer(k int) *summarizer { return &summarizer{k: k, groups: map[string]*tally{}} }

func (s *summarizer) add(o outcome) {
	t := s.groups[o.GroupID]
	if t == nil {
		t = &tally{gs: GroupSummary{GroupID: o.GroupID, TaskID: o.TaskID, RewardMin: math.Inf(1), RewardMax: math.Inf(-1)}}
		s.groups[o.GroupID] = t
	}
	g := &t.gs
	g.N++
	t.sum += o.Reward
	t.sumSq += o.Reward * o.Reward
	g.RewardMin = min(g.RewardMin, o.Reward)
	g.RewardMax = max(g.RewardMax, o.Reward)
	ok := o.passed()
	if ok {
		g.Passed++
	}
	if o.RealCheck != nil {
		g.RealChecked++
		if ok {
			g.SimPassed++
		}
		if o.RealCheck.Deceived {
			g.Deceived++
		}
	}
}

// summary is the statistics of the episodes added so far.
func (s *summarizer) summary() *Summary {
	ids := make([]string, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := &Summary{K: s.k, Groups: []GroupSummary{}}
	total := 0.0
	for _, id := range ids {
		t := s.groups[id]
		gs := t.gs
		n := float64(gs.N)
		gs.RewardMean = t.sum / n
		// The population variance from the running sums. Rounding can
		// leave a constant group's a hair off zero, and 0 must mean "no
		// signal" exactly, so a group whose rewards are all equal gets 0.
		if gs.RewardMin != gs.RewardMax {
			gs.RewardStd = math.Sqrt(max(t.sumSq/n-gs.RewardMean*gs.RewardMean, 0))
		}
		gs.PassAt1 = passAt(gs.N, gs.Passed, 1)
		gs.PassAtK = passAt(gs.N, gs.Passed, s.k)
		if gs.SimPassed > 0 {
			gs.DeceivedRate = float64(gs.Deceived) / float64(gs.SimPassed)
		}
		out.Episodes += gs.N
		if gs.RewardStd > 0 {
			out.SignalGroups++
		}
		out.RealChecked += gs.RealChecked
		out.SimPassed += gs.SimPassed
		out.Deceived += gs.Deceived
		out.PassAt1 += gs.PassAt1
		out.PassAtK += gs.PassAtK
		total += t.sum
		out.Groups = append(out.Groups, gs)
	}
	if out.Episodes > 0 {
		out.RewardMean = total / float64(out.Episodes)
	}
	if out.SimPassed > 0 {
		out.DeceivedRate = float64(out.Deceived) / float64(out.SimPassed)
	}
	if len(ids) > 0 {
		out.PassAt1 /= float64(len(ids))
		out.PassAtK /= float64(len(ids))
	}
	return out
}

// Summarize computes group statistics; k is the group size pass@k uses.
func Summarize(rows []Row, k int) *Summary {
	s := newSummarizer(k)
	for _, r := range rows {
		s.add(outcomeOf(r))
	}
	return s.summary()
}
