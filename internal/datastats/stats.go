// Package datastats summarises a corpus of trajectories for
// `agentworld data stats`: per domain, the distributions of the
// word-overlap statistics and the share of each loss-masking category
// (package masking), as a table, JSON, or a chart (SVG or PNG).
package datastats

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/agentworld/agentworld/internal/datapipe"
	"github.com/agentworld/agentworld/internal/masking"
)

// Histogram bins of the corpus statistics. Fractions (OL, Nov, Jac) use ten
// equal bins on [0, 1]; R, turn counts and lengths use powers of two.
const (
	fracBins = 10
	// RBins are log2 bins of R: bin 0 is R < 1/16, bin i is
	// 2^(i-5) ≤ R < 2^(i-4), the last is R ≥ 64.
	rBins   = 12
	logBins = 24
)

// Dist summarises one quantity: count, mean, min, max and a histogram.
type Dist struct {
	N    int64   `json:"n"`
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	Hist []int64 `json:"hist"`
	sum  float64 `json:"-"`
	bin  func(float64) int
}

func newDist(bins int, bin func(float64) int) *Dist {
	return &Dist{Hist: make([]int64, bins), bin: bin, Min: math.Inf(1), Max: math.Inf(-1)}
}

func (d *Dist) add(x float64) {
	d.N++
	d.sum += x
	d.Min = math.Min(d.Min, x)
	d.Max = math.Max(d.Max, x)
	d.Hist[d.bin(x)]++
	d.Mean = d.sum / float64(d.N)
}

func (d *Dist) merge(o *Dist) {
	if o.N == 0 {
		return
	}
	d.N += o.N
	d.sum += o.sum
	d.Min = math.Min(d.Min, o.Min)
	d.Max = math.Max(d.Max, o.Max)
	for i := range d.Hist {
		d.Hist[i] += o.Hist[i]
	}
	d.Mean = d.sum / float64(d.N)
}

func fracBin(x float64) int { return min(max(int(x*fracBins), 0), fracBins-1) }

func rBin(x float64) int {
	if x <= 0 {
		return 0
	}
	return min(max(int(math.Floor(math.Log2(x)))+5, 0), rBins-1)
}

// log2Bin: bin 0 holds 0, bin i holds 2^(i-1) ≤ x < 2^i.
func log2Bin(x float64) int {
	if x < 1 {
		return 0
	}
	return min(int(math.Floor(math.Log2(x)))+1, logBins-1)
}

// DomainStats are the distributions of one domain.
type DomainStats struct {
	Trajectories int64 `json:"trajectories"`
	// Turns is the number of turns per trajectory.
	Turns *Dist `json:"turns"`
	// ActionChars and ObservationChars are text lengths in characters.
	ActionChars      *Dist            `json:"action_chars"`
	ObservationChars *Dist            `json:"observation_chars"`
	OL               *Dist            `json:"ol"`
	Nov              *Dist            `json:"nov"`
	Jac              *Dist            `json:"jac"`
	R                *Dist            `json:"r"`
	Categories       map[string]int64 `json:"categories"`
}

func newDomainStats() *DomainStats {
	return &DomainStats{
		Turns:            newDist(logBins, log2Bin),
		ActionChars:      newDist(logBins, log2Bin),
		ObservationChars: newDist(logBins, log2Bin),
		OL:               newDist(fracBins, fracBin),
		Nov:              newDist(fracBins, fracBin),
		Jac:              newDist(fracBins, fracBin),
		R:                newDist(rBins, rBin),
		Categories:       map[string]int64{},
	}
}

func (d *DomainStats) merge(o *DomainStats) {
	d.Trajectories += o.Trajectories
	d.Turns.merge(o.Turns)
	d.ActionChars.merge(o.ActionChars)
	d.ObservationChars.merge(o.ObservationChars)
	d.OL.merge(o.OL)
	d.Nov.merge(o.Nov)
	d.Jac.merge(o.Jac)
	d.R.merge(o.R)
	for k, v := range o.Categories {
		d.Categories[k] += v
	}
}

// CorpusStats are per-domain distributions plus the whole corpus ("all").
type CorpusStats struct {
	Domains    map[string]*DomainStats `json:"domains"`
	All        *DomainStats            `json:"all"`
	Categories []string                `json:"category_order"`
}

func (c *CorpusStats) domain(name string) *DomainStats {
	d, ok := c.Domains[name]
	if !ok {
		d = newDomainStats()
		c.Domains[name] = d
	}
	return d
}

// DomainNames lists the domains in name order.
func (c *CorpusStats) DomainNames() []string {
	names := make([]string, 0, len(c.Domains))
	for n := range c.Domains {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CollectStats streams trajectories and gathers their distributions in
// constant memory. cfg nil means the default masking config.
func CollectStats(ctx context.Context, files []string, cfg *masking.MaskingConfig, opts *datapipe.Options) (*CorpusStats, *datapipe.Summary, error) {
	if cfg == nil {
		var err error
		if cfg, err = masking.LoadMaskingConfig(""); err != nil {
			return nil, nil, err
		}
	}
	o := opts.Norm()
	scorers := make([]masking.Scorer, o.Workers)
	total := &CorpusStats{Domains: map[string]*DomainStats{}, All: newDomainStats(), Categories: cfg.Names()}
	sum := &datapipe.Summary{}
	err := datapipe.Run(ctx, files, o, sum, func(w int, batch []datapipe.InLine) (*CorpusStats, []*datapipe.RecordError, int64, error) {
		part := &CorpusStats{Domains: map[string]*DomainStats{}}
		var errs []*datapipe.RecordError
		var ok int64
		for _, l := range batch {
			t, es := datapipe.DecodeTrajectory(l.Data, l.File, l.N)
			if len(es) > 0 {
				errs = append(errs, es...)
				continue
			}
			ok++
			d := part.domain(t.Domain)
			d.Trajectories++
			d.Turns.add(float64(len(t.Turns)))
			dc := cfg.For(t.Domain)
			for _, tu := range t.Turns {
				st := scorers[w].Score(tu.Action, tu.Observation)
				d.ActionChars.add(float64(utf8.RuneCountInString(tu.Action)))
				d.ObservationChars.add(float64(utf8.RuneCountInString(tu.Observation)))
				d.OL.add(st.OL)
				d.Nov.add(st.Nov)
				d.Jac.add(st.Jac)
				d.R.add(st.R)
				d.Categories[dc.Categories[dc.Classify(&st)].Name]++
			}
		}
		return part, errs, ok, nil
	}, func(part *CorpusStats) error {
		for name, d := range part.Domains {
			total.domain(name).merge(d)
			total.All.merge(d)
		}
		return nil
	})
	return total, sum, err
}

// WriteTable prints the statistics as aligned text tables: one overview
// row per domain, category shares, then the statistic histograms.
func (c *CorpusStats) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	names := append(c.DomainNames(), "all")
	get := func(n string) *DomainStats {
		if n == "all" {
			return c.All
		}
		return c.Domains[n]
	}
	fmt.Fprintln(tw, "domain\ttrajectories\tturns\tturns/traj (mean)\tmin\tmax\taction chars (mean)\tobservation chars (mean)\tOL\tNov\tJac\tR (mean)\t")
	for _, n := range names {
		d := get(n)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\t%.2f\t\n", n, d.Trajectories, d.OL.N,
			d.Turns.Mean, finite(d.Turns.Min), finite(d.Turns.Max), d.ActionChars.Mean, d.ObservationChars.Mean,
			d.OL.Mean, d.Nov.Mean, d.Jac.Mean, d.R.Mean)
	}
	fmt.Fprintln(tw)
	fmt.Fprint(tw, "category share\t")
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t", n)
	}
	fmt.Fprintln(tw)
	for _, cat := range c.Categories {
		fmt.Fprintf(tw, "%s\t", cat)
		for _, n := range names {
			d := get(n)
			fmt.Fprintf(tw, "%.1f%%\t", pct(d.Categories[cat], d.OL.N))
		}
		fmt.Fprintln(tw)
	}
	for _, h := range []struct {
		title  string
		labels []string
		dist   func(*DomainStats) *Dist
	}{
		{"OL", FracBinLabels(), func(d *DomainStats) *Dist { return d.OL }},
		{"Nov", FracBinLabels(), func(d *DomainStats) *Dist { return d.Nov }},
		{"Jac", FracBinLabels(), func(d *DomainStats) *Dist { return d.Jac }},
		{"R", RBinLabels(), func(d *DomainStats) *Dist { return d.R }},
	} {
		fmt.Fprintln(tw)
		fmt.Fprintf(tw, "%s histogram\t", h.title)
		for _, n := range names {
			fmt.Fprintf(tw, "%s\t", n)
		}
		fmt.Fprintln(tw)
		for i, lab := range h.labels {
			fmt.Fprintf(tw, "%s\t", lab)
			for _, n := range names {
				d := h.dist(get(n))
				fmt.Fprintf(tw, "%.1f%%\t", pct(d.Hist[i], d.N))
			}
			fmt.Fprintln(tw)
		}
	}
	return tw.Flush()
}

func finite(x float64) float64 {
	if math.IsInf(x, 0) {
		return 0
	}
	return x
}

func pct(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

// FracBinLabels names the ten bins of OL, Nov and Jac.
func FracBinLabels() []string {
	out := make([]string, fracBins)
	for i := range out {
		out[i] = fmt.Sprintf("[%.1f,%.1f%s", float64(i)/fracBins, float64(i+1)/fracBins, map[bool]string{true: "]", false: ")"}[i == fracBins-1])
	}
	return out
}

// RBinLabels names the log2 bins of R.
func RBinLabels() []string {
	out := make([]string, rBins)
	for i := range out {
		lo, hi := math.Pow(2, float64(i-5)), math.Pow(2, float64(i-4))
		switch i {
		case 0:
			out[i] = "<1/16"
		case rBins - 1:
			out[i] = fmt.Sprintf("≥%g", lo)
		default:
			out[i] = strings.TrimSpace(fmt.Sprintf("[%g,%g)", lo, hi))
		}
	}
	return out
}
