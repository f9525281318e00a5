package masking

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// CalibrateOptions configure Calibrate; nil means the defaults.
type CalibrateOptions struct {
	// MinTurns is the fewest turns a domain needs to get its own bounds;
	// smaller domains keep the base bounds. 0 means 200.
	MinTurns int
}

// Calibration is the result of Calibrate: the calibrated config and the
// category shares each domain gets under the base and calibrated configs.
type Calibration struct {
	Config  *MaskingConfig `json:"config"`
	Domains []DomainShares `json:"domains"`
	// All sums every domain.
	All DomainShares `json:"all"`
}

// DomainShares compares one domain's category shares (fractions of its
// turns, by category name) under the base and the calibrated config.
type DomainShares struct {
	Domain string `json:"domain"`
	Turns  int    `json:"turns"`
	// Calibrated is false when the domain had fewer than MinTurns turns and
	// kept the base bounds.
	Calibrated bool               `json:"calibrated"`
	Base       map[string]float64 `json:"base"`
	Quantile   map[string]float64 `json:"quantile"`
}

// Calibrate reads trajectories, scores every turn and derives per-domain
// bounds from the corpus's quantiles: a bound of the base config at value x
// on one of ol, nov, jac or r sits at some rank q of the pooled corpus (the
// share of turns below x for a min, at or below x for a max); for each
// domain the bound becomes that domain's own value at rank q. A domain thus
// keeps the base config's category shares as the whole corpus has them,
// measured against its own distribution: a domain whose observations are
// all long (a terminal screen) is not classified as mostly "context" only
// because it is long. Word-count bounds (act_words, obs_words) are
// structural, not statistical, and stay as they are; each statistic is
// ranked on its own (marginal quantiles), so combined rules such as echo's
// hold approximately. The statistics of every turn are kept in memory (48
// bytes a turn). base nil means the default config.
func Calibrate(ctx context.Context, files []string, base *MaskingConfig, co *CalibrateOptions, opts *datapipe.Options) (*Calibration, *datapipe.Summary, error) {
	if base == nil {
		var err error
		if base, err = LoadMaskingConfig(""); err != nil {
			return nil, nil, err
		}
	}
	minTurns := 200
	if co != nil && co.MinTurns > 0 {
		minTurns = co.MinTurns
	}
	o := opts.Norm()
	scorers := make([]Scorer, o.Workers)
	byDomain := map[string][]Stats{}
	type part map[string][]Stats
	sum := &datapipe.Summary{}
	err := datapipe.Run(ctx, files, o, sum, func(w int, batch []datapipe.InLine) (part, []*datapipe.RecordError, int64, error) {
		p := part{}
		errs, ok, err := datapipe.EachTrajectory(batch, func(_ *datapipe.InLine, t *trajectory.Trajectory) error {
			for _, tu := range t.Turns {
				p[t.Domain] = append(p[t.Domain], scorers[w].Score(tu.Action, tu.Observation))
			}
			return nil
		})
		return p, errs, ok, err
	}, func(p part) error {
		for d, st := range p {
			byDomain[d] = append(byDomain[d], st...)
		}
		return nil
	})
	if err != nil {
		return nil, sum, err
	}
	var pooled []Stats
	domains := slices.Sorted(maps.Keys(byDomain))
	for _, d := range domains {
		pooled = append(pooled, byDomain[d]...)
	}
	pooledCols := newStatColumns(pooled)
	cfg := &MaskingConfig{Categories: cloneCategories(base.Categories)}
	for _, d := range domains {
		if len(byDomain[d]) < minTurns {
			continue
		}
		if cfg.Domains == nil {
			cfg.Domains = map[string][]Category{}
		}
		cfg.Domains[d] = calibrateCategories(base.For(d).Categories, pooledCols, newStatColumns(byDomain[d]))
	}
	if err := cfg.Validate(); err != nil {
		return nil, sum, fmt.Errorf("calibrated config: %w", err)
	}
	c := &Calibration{Config: cfg, All: DomainShares{Domain: "all", Base: map[string]float64{}, Quantile: map[string]float64{}}}
	for _, d := range domains {
		ds := DomainShares{Domain: d, Turns: len(byDomain[d]), Base: map[string]float64{}, Quantile: map[string]float64{}}
		_, ds.Calibrated = cfg.Domains[d]
		bc, qc := base.For(d), cfg.For(d)
		for i := range byDomain[d] {
			s := &byDomain[d][i]
			ds.Base[bc.Categories[bc.Classify(s)].Name]++
			ds.Quantile[qc.Categories[qc.Classify(s)].Name]++
		}
		for name, n := range ds.Base {
			c.All.Base[name] += n
		}
		for name, n := range ds.Quantile {
			c.All.Quantile[name] += n
		}
		c.All.Turns += ds.Turns
		normalize(ds.Base, ds.Turns)
		normalize(ds.Quantile, ds.Turns)
		c.Domains = append(c.Domains, ds)
	}
	normalize(c.All.Base, c.All.Turns)
	normalize(c.All.Quantile, c.All.Turns)
	return c, sum, nil
}

func normalize(m map[string]float64, n int) {
	for k := range m {
		m[k] /= float64(n)
	}
}

// statColumns holds the sorted values of each statistic.
type statColumns map[string][]float64

func newStatColumns(st []Stats) statColumns {
	c := statColumns{}
	for _, s := range st {
		c["ol"] = append(c["ol"], s.OL)
		c["nov"] = append(c["nov"], s.Nov)
		c["jac"] = append(c["jac"], s.Jac)
		c["r"] = append(c["r"], s.R)
	}
	for _, v := range c {
		slices.Sort(v)
	}
	return c
}

func cloneCategories(cats []Category) []Category {
	out := slices.Clone(cats)
	for i := range out {
		w := &out[i].When
		for _, b := range []**Bound{&w.OL, &w.Nov, &w.Jac, &w.R, &w.ActWords, &w.ObsWords} {
			if *b != nil {
				nb := Bound{}
				if (*b).Min != nil {
					nb.Min = new(*(*b).Min)
				}
				if (*b).Max != nil {
					nb.Max = new(*(*b).Max)
				}
				*b = &nb
			}
		}
	}
	return out
}

// calibrateCategories moves every ol/nov/jac/r bound of cats from its rank
// in pooled to the same rank in dom.
func calibrateCategories(cats []Category, pooled, dom statColumns) []Category {
	out := cloneCategories(cats)
	for i := range out {
		w := &out[i].When
		for stat, b := range map[string]*Bound{"ol": w.OL, "nov": w.Nov, "jac": w.Jac, "r": w.R} {
			if b == nil {
				continue
			}
			if b.Min != nil {
				*b.Min = minBoundAt(dom[stat], rankBelow(pooled[stat], *b.Min))
			}
			if b.Max != nil {
				*b.Max = maxBoundAt(dom[stat], rankAtMost(pooled[stat], *b.Max))
			}
			if b.Min != nil && b.Max != nil && *b.Min > *b.Max {
				*b.Max = *b.Min
			}
		}
	}
	return out
}

// rankBelow is the share of sorted values below x.
func rankBelow(sorted []float64, x float64) float64 {
	i, _ := slices.BinarySearch(sorted, x)
	return float64(i) / float64(len(sorted))
}

// rankAtMost is the share of sorted values at or below x.
func rankAtMost(sorted []float64, x float64) float64 {
	i, found := slices.BinarySearch(sorted, x)
	for found && i < len(sorted) && sorted[i] == x {
		i++
	}
	return float64(i) / float64(len(sorted))
}

// minBoundAt is the value v such that about a share q of sorted lies below
// v, so "≥ v" holds for the rest.
func minBoundAt(sorted []float64, q float64) float64 {
	k := int(math.Round(q * float64(len(sorted))))
	if k >= len(sorted) {
		return math.Nextafter(sorted[len(sorted)-1], math.Inf(1))
	}
	return sorted[k]
}

// maxBoundAt is the value v such that about a share q of sorted is at or
// below v.
func maxBoundAt(sorted []float64, q float64) float64 {
	k := int(math.Round(q * float64(len(sorted))))
	if k <= 0 {
		return math.Nextafter(sorted[0], math.Inf(-1))
	}
	return sorted[min(k, len(sorted))-1]
}

// WriteTable prints each domain's category shares under the base and the
// calibrated config, one "base → calibrated" cell per category.
func (c *Calibration) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	names := c.Config.Names()
	fmt.Fprint(tw, "domain\tturns\tbounds")
	for _, n := range names {
		fmt.Fprintf(tw, "\t%s", n)
	}
	fmt.Fprintln(tw)
	for _, d := range append(slices.Clone(c.Domains), c.All) {
		how := "quantile"
		if !d.Calibrated && d.Domain != "all" {
			how = "base (too few turns)"
		} else if d.Domain == "all" {
			how = ""
		}
		fmt.Fprintf(tw, "%s\t%d\t%s", d.Domain, d.Turns, how)
		for _, n := range names {
			fmt.Fprintf(tw, "\t%.1f%% → %.1f%%", 100*d.Base[n], 100*d.Quantile[n])
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
