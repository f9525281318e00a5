package rejection

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSelect(t *testing.T) {
	v := func(r float64, rule bool) Beam { return Beam{Valid: true, Reward: r, RulePass: rule} }
	none := []bool{false, false, false, false}
	for _, tc := range []struct {
		name   string
		p      Policy
		beams  []Beam
		rank   []int
		kept   []bool
		chosen int
		reject int
	}{
		{"best above the bar, paired with the worst", DefaultPolicy, []Beam{v(13.5, false), v(22.5, false), v(9, false), v(18, false)},
			[]int{3, 1, 4, 2}, []bool{false, true, false, false}, 1, 2},
		{"nothing reaches min_reward: no label, no pair", DefaultPolicy, []Beam{v(13.5, false), v(9, false), v(4.5, false), v(13.5, false)},
			[]int{1, 3, 4, 2}, none, -1, -1},
		{"top_k 2 keeps the two best eligible", Policy{MinReward: 10, TopK: 2}, []Beam{v(12, false), v(20, false), v(11, false), v(5, false)},
			[]int{2, 1, 3, 4}, []bool{true, true, false, false}, 1, 3},
		{"require_rule_pass skips a better beam without it", Policy{MinReward: 10, RequireRulePass: true}, []Beam{v(24, false), v(20, true), v(1, false), v(1, false)},
			[]int{1, 2, 3, 4}, []bool{false, true, false, false}, 1, 3},
		{"a gap under min_margin gives no pair", Policy{MinReward: 10, MinMargin: 5}, []Beam{v(20, false), v(18, false), v(17, false), v(16, false)},
			[]int{1, 2, 3, 4}, []bool{true, false, false, false}, -1, -1},
		{"equal rewards give no pair even at margin 0", Policy{MinReward: 10}, []Beam{v(20, false), v(20, false), v(20, false), v(20, false)},
			[]int{1, 2, 3, 4}, []bool{true, false, false, false}, -1, -1},
		{"invalid beams rank last and are never kept or paired", Policy{TopK: 4}, []Beam{{}, v(3, false), {}, v(1, false)},
			[]int{3, 1, 4, 2}, []bool{false, true, false, true}, 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.p.Select(tc.beams)
			want := Decision{Rank: tc.rank, Kept: tc.kept, Chosen: tc.chosen, Rejected: tc.reject}
			if diff := cmp.Diff(want, d); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy([]byte("min_reward: 20\nrequire_rule_pass: true\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Policy{MinReward: 20, TopK: 1, MinMargin: 2.5, RequireRulePass: true}); p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	for _, bad := range []string{"min_reward: high\n", "top_k: -1\n", "min_margin: -2\n", "minreward: 3\n", "- 1\n", "min_reward: .nan\n"} {
		if _, err := ParsePolicy([]byte(bad), "p.yaml"); !errors.Is(err, ErrBadPolicy) {
			t.Errorf("%q: error %v, want ErrBadPolicy", bad, err)
		}
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte("min_reward: 18\ntop_k: 1\nmin_margin: 2.5\nrequire_rule_pass: false\n"))
	f.Add([]byte("{\"top_k\": 3}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePolicy(b, "fuzz")
		if err != nil {
			return
		}
		if p.Validate() != nil {
			t.Fatalf("accepted an invalid policy %+v", p)
		}
		beams := []Beam{{Valid: true, Reward: 20}, {Valid: true, Reward: 5}, {}}
		d := p.Select(beams)
		if len(d.Rank) != 3 || d.Kept[2] {
			t.Fatalf("decision %+v", d)
		}
	})
}
