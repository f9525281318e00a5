package rejection

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// HistogramBins is the number of equal reward bins over [0, 25] in the
// summary's histograms.
const HistogramBins = 10

// Published is the published rejection sampling's outcome, a reference
// point for the keep rate (not a target): 10,250 candidates, 7,094 kept.
const Published = "published: 10,250 → 7,094 kept (69.2%)"

// Counts are the input → kept numbers of all samples or of one domain.
type Counts struct {
	// Samples is the input samples; Kept those with at least one kept beam;
	// KeepRate is Kept / Samples.
	Samples  int64   `json:"samples"`
	Kept     int64   `json:"kept"`
	KeepRate float64 `json:"keep_rate"`
	// Beams is every beam; KeptBeams those kept; FailedBeams those without
	// a reward (a refused request or a dropped judge verdict); Pairs the
	// samples that gave a preference pair.
	Beams       int64 `json:"beams"`
	KeptBeams   int64 `json:"kept_beams"`
	FailedBeams int64 `json:"failed_beams"`
	Pairs       int64 `json:"pairs"`
	// RulePass counts beams whose rule verifier passed.
	RulePass int64 `json:"rule_pass"`
	// KeptDiffer counts kept beams whose prediction differs from the real
	// observation once volatile values are masked (the rule verifier's
	// deterministic check); KeptTargetsDiffer those whose SFT target does:
	// all of them with the teacher target, none with the real one.
	KeptDiffer        int64 `json:"kept_differ"`
	KeptTargetsDiffer int64 `json:"kept_targets_differ"`
	// Histogram counts the rewards of every scored beam in HistogramBins
	// equal bins over [0, 25] (the last bin includes 25); KeptHistogram
	// those of kept beams; BestHistogram the best beam of each sample.
	Histogram     []int64 `json:"histogram"`
	KeptHistogram []int64 `json:"kept_histogram"`
	BestHistogram []int64 `json:"best_histogram"`
}

// Summary is what `data sample` prints and writes to summary.json. It is a
// function of the candidates file alone, so a resumed run writes the same.
type Summary struct {
	Teacher string `json:"teacher"`
	// Judge is the rubric judge's model, "rules" for the offline rules
	// scorer (a pipeline check, not comparable with a model judge).
	Judge  string `json:"judge"`
	Beams  int    `json:"beams_per_sample"`
	Policy Policy `json:"policy"`
	// Target is what the SFT targets' answers are.
	Target    Target             `json:"target"`
	Total     Counts             `json:"total"`
	Domains   map[string]*Counts `json:"domains"`
	Reference string             `json:"reference"`
	// PairsWritten is the lines of the pairs file.
	PairsWritten int64 `json:"pairs_written"`
}

func newCounts() *Counts {
	return &Counts{Histogram: make([]int64, HistogramBins), KeptHistogram: make([]int64, HistogramBins), BestHistogram: make([]int64, HistogramBins)}
}

func bin(v float64) int {
	return min(max(int(math.Floor(v/25*HistogramBins)), 0), HistogramBins-1)
}

// Summarize reads a candidates file (grouped by sample, as Run writes it)
// in one streaming pass; target is the run's (for KeptTargetsDiffer).
func Summarize(candidates string, p Policy, beams int, target Target) (*Summary, error) {
	if target == "" {
		target = TargetTeacher
	}
	s := &Summary{Beams: beams, Policy: p, Target: target, Domains: map[string]*Counts{}, Reference: Published}
	total := newCounts()
	var cur []*Candidate
	flush := func() {
		if len(cur) == 0 {
			return
		}
		d := s.Domains[cur[0].Domain]
		if d == nil {
			d = newCounts()
			s.Domains[cur[0].Domain] = d
		}
		kept, pair, best := false, false, -1.0
		for _, c := range cur {
			b := c.beam()
			for _, x := range []*Counts{total, d} {
				x.Beams++
				switch {
				case !b.Valid:
					x.FailedBeams++
				default:
					x.Histogram[bin(b.Reward)]++
					if b.RulePass {
						x.RulePass++
					}
					if c.Kept {
						x.KeptBeams++
						x.KeptHistogram[bin(b.Reward)]++
						if !c.matchesTruth() {
							x.KeptDiffer++
							if target == TargetTeacher {
								x.KeptTargetsDiffer++
							}
						}
					}
				}
			}
			if b.Valid {
				best = max(best, b.Reward)
			}
			kept = kept || c.Kept
			pair = pair || c.Chosen
		}
		for _, x := range []*Counts{total, d} {
			x.Samples++
			if kept {
				x.Kept++
			}
			if pair {
				x.Pairs++
			}
			if best >= 0 {
				x.BestHistogram[bin(best)]++
			}
		}
		cur = cur[:0]
	}
	err := eachLine([]string{candidates}, 0, func(b []byte, file string, line int) error {
		var c Candidate
		if err := json.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("%s:%d: %v", file, line, err)
		}
		if len(cur) > 0 && cur[0].Seq != c.Seq {
			flush()
		}
		cur = append(cur, &c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	flush()
	for _, x := range append([]*Counts{total}, values(s.Domains)...) {
		if x.Samples > 0 {
			x.KeepRate = float64(x.Kept) / float64(x.Samples)
		}
	}
	s.Total = *total
	return s, nil
}

func values(m map[string]*Counts) []*Counts {
	out := make([]*Counts, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// WriteText prints the summary as a table: input → kept per domain and in
// total, with the reward histogram of every beam.
func (s *Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	judge := s.Judge
	if judge == "rules" {
		judge += " (offline rules judge: a pipeline check, not comparable with a model judge)"
	}
	fmt.Fprintf(&b, "teacher %s, judge %s, %d beams per sample; policy min_reward %g, top_k %d, min_margin %g, require_rule_pass %t\n",
		s.Teacher, judge, s.Beams, s.Policy.MinReward, s.Policy.TopK, s.Policy.MinMargin, s.Policy.RequireRulePass)
	fmt.Fprintf(&b, "%-10s %8s %8s %7s %8s %8s %7s %6s  %s\n", "domain", "samples", "kept", "rate", "beams", "kept", "failed", "pairs", "reward histogram [0,25] in 10 bins")
	row := func(name string, c *Counts) {
		hist := make([]string, len(c.Histogram))
		for i, v := range c.Histogram {
			hist[i] = fmt.Sprint(v)
		}
		fmt.Fprintf(&b, "%-10s %8d %8d %6.1f%% %8d %8d %7d %6d  %s\n", name, c.Samples, c.Kept, 100*c.KeepRate, c.Beams, c.KeptBeams, c.FailedBeams, c.Pairs, strings.Join(hist, " "))
	}
	names := make([]string, 0, len(s.Domains))
	for d := range s.Domains {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		row(d, s.Domains[d])
	}
	row("total", &s.Total)
	fmt.Fprintf(&b, "input → kept: %d → %d samples (%.1f%%); %s\n", s.Total.Samples, s.Total.Kept, 100*s.Total.KeepRate, s.Reference)
	switch {
	case s.Target == TargetReal:
		fmt.Fprintf(&b, "targets: the teacher's reasoning, then the real observation (--target real); %d of %d kept predictions differed from it after volatile masking\n", s.Total.KeptDiffer, s.Total.KeptBeams)
	default:
		fmt.Fprintf(&b, "targets: the teacher's predictions (--target teacher); %d of %d kept differ from the real observation after volatile masking\n", s.Total.KeptTargetsDiffer, s.Total.KeptBeams)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
