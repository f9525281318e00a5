package rejection

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/goccy/go-yaml"
)

// Policy decides which beams of a sample are kept as SFT targets and which
// pair of beams becomes a preference pair. Rewards are the hybrid reward's
// [0, 25].
type Policy struct {
	// MinReward is the lowest reward a kept beam may have.
	MinReward float64 `yaml:"min_reward" json:"min_reward"`
	// TopK is how many beams of one sample are kept at most, best first;
	// 0 means 1 (one label per sample).
	TopK int `yaml:"top_k" json:"top_k"`
	// MinMargin is the least reward gap between the chosen (best kept) and
	// the rejected (worst) beam of a preference pair; a sample whose gap is
	// smaller (or 0) gives no pair. It does not affect SFT selection.
	MinMargin float64 `yaml:"min_margin" json:"min_margin"`
	// RequireRulePass keeps only beams whose rule verifier passed (format
	// and deterministic content match the real observation).
	RequireRulePass bool `yaml:"require_rule_pass" json:"require_rule_pass"`
}

// DefaultPolicy keeps the best beam of a sample when its reward is at least
// 18 (a mean judge dimension of 4 without the rule, or about 3.6 with it,
// under the default 0.9 : 0.1 mix) and pairs it with the worst beam when
// they differ by at least 2.5 (one rule pass, or half a judge point).
var DefaultPolicy = Policy{MinReward: 18, TopK: 1, MinMargin: 2.5}

// ErrBadPolicy reports an unusable keep policy.
var ErrBadPolicy = errors.New("bad keep policy")

// LoadPolicy reads a keep policy from YAML (or JSON); fields it leaves out
// keep DefaultPolicy's values:
//
//	min_reward: 18
//	top_k: 1
//	min_margin: 2.5
//	require_rule_pass: false
func LoadPolicy(path string) (Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return DefaultPolicy, err
	}
	return ParsePolicy(b, path)
}

// ParsePolicy decodes a keep policy like LoadPolicy; name is for errors.
func ParsePolicy(data []byte, name string) (Policy, error) {
	p := DefaultPolicy
	if err := yaml.UnmarshalWithOptions(data, &p, yaml.Strict()); err != nil {
		return DefaultPolicy, fmt.Errorf("%s: %w: %v (want a mapping of min_reward, top_k, min_margin, require_rule_pass)", name, ErrBadPolicy, err)
	}
	if err := p.Validate(); err != nil {
		return DefaultPolicy, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// Validate checks the policy's numbers.
func (p Policy) Validate() error {
	switch {
	case math.IsNaN(p.MinReward) || math.IsInf(p.MinReward, 0):
		return fmt.Errorf("%w: min_reward %v is not a number", ErrBadPolicy, p.MinReward)
	case p.TopK < 0:
		return fmt.Errorf("%w: top_k %d is negative", ErrBadPolicy, p.TopK)
	case math.IsNaN(p.MinMargin) || math.IsInf(p.MinMargin, 0) || p.MinMargin < 0:
		return fmt.Errorf("%w: min_margin %v must be a number ≥ 0", ErrBadPolicy, p.MinMargin)
	}
	return nil
}

// Beam is what selection reads of one scored beam.
type Beam struct {
	// Valid is false for a beam without a reward (a failed request, a
	// dropped judge verdict); it is never kept or paired.
	Valid    bool
	Reward   float64
	RulePass bool
}

// Decision is the policy applied to one sample's beams (indices into the
// beams given to Select).
type Decision struct {
	// Rank orders every beam best first: valid beams by reward, ties by
	// index, then invalid ones by index. Rank[i] is the rank (1-based) of
	// beam i.
	Rank []int
	// Kept marks the beams kept as SFT targets.
	Kept []bool
	// Chosen (the best kept beam) and Rejected (the worst other valid
	// beam) are the preference pair, -1 when there is none: no beam kept,
	// or a gap of 0 or under MinMargin.
	Chosen, Rejected int
}

// Select applies the policy to one sample's beams.
func (p Policy) Select(beams []Beam) Decision {
	k := p.TopK
	if k == 0 {
		k = 1
	}
	order := make([]int, len(beams))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := beams[order[a]], beams[order[b]]
		if x.Valid != y.Valid {
			return x.Valid
		}
		return x.Valid && x.Reward > y.Reward
	})
	d := Decision{Rank: make([]int, len(beams)), Kept: make([]bool, len(beams)), Chosen: -1, Rejected: -1}
	kept := 0
	for r, i := range order {
		d.Rank[i] = r + 1
		b := beams[i]
		if kept < k && b.Valid && b.Reward >= p.MinReward && (!p.RequireRulePass || b.RulePass) {
			d.Kept[i] = true
			kept++
		}
	}
	if kept == 0 {
		return d
	}
	best := -1
	for _, i := range order {
		if d.Kept[i] {
			best = i
			break
		}
	}
	worst := -1
	for r := len(order) - 1; r > 0; r-- {
		if beams[order[r]].Valid && order[r] != best {
			worst = order[r]
			break
		}
	}
	if worst >= 0 {
		gap := beams[best].Reward - beams[worst].Reward
		if gap > 0 && gap >= p.MinMargin {
			d.Chosen, d.Rejected = best, worst
		}
	}
	return d
}
