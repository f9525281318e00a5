package agree

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/agentworld/agentworld/internal/score"
)

// humanDims are the dimensions compared with people, then the pooled one.
var humanDims = append(slices.Clone(score.Dimensions), "total")

func (r *Report) human(samples []Sample, labels []Label, o Options) {
	if len(labels) == 0 {
		return
	}
	type pred struct{ model, key string }
	byPred := map[pred][]Sample{}
	for _, s := range samples {
		byPred[pred{s.Model, s.Key}] = append(byPred[pred{s.Model, s.Key}], s)
	}
	// Units are labelled predictions; each holds its labels and, per
	// judge, the judge's sample.
	type unit struct {
		labels []Label
		judged map[string]Sample
	}
	units := map[pred]*unit{}
	var order []pred
	turing := map[string][]float64{} // model → 1 fooled, 0 not
	for _, l := range labels {
		p := pred{l.Model, l.Key}
		ss, ok := byPred[p]
		if !ok {
			r.UnmatchedLabels++
			continue
		}
		if l.TuringPick != "" {
			v := 0.0
			if l.TuringPick == PickPrediction {
				v = 1
			}
			turing[l.Model] = append(turing[l.Model], v)
		}
		u := units[p]
		if u == nil {
			u = &unit{judged: map[string]Sample{}}
			for _, s := range ss {
				u.judged[s.Judge] = s
			}
			units[p] = u
			order = append(order, p)
		}
		u.labels = append(u.labels, l)
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].model != order[j].model {
			return order[i].model < order[j].model
		}
		return order[i].key < order[j].key
	})
	list := make([]*unit, len(order))
	for i, p := range order {
		list[i] = units[p]
	}
	// pairsOf collects, for one judge and dimension, the (human, judge)
	// rating pairs of the units drawn, and the α units (people's values
	// and the judge's).
	pairsOf := func(judge string, dim int, draw []int) (a, b []int, au [][]int) {
		for i, u := range list {
			w := 1
			if draw != nil {
				w = draw[i]
			}
			if w == 0 {
				continue
			}
			s, ok := u.judged[judge]
			if !ok {
				continue
			}
			dims := []int{dim}
			if dim == len(score.Dimensions) {
				dims = []int{0, 1, 2, 3, 4}
			}
			if dim == len(score.Dimensions)+1 { // turing
				if s.TuringPick == "" {
					continue
				}
				jv := 0
				if s.TuringPick == PickPrediction {
					jv = 1
				}
				var vals []int
				for _, l := range u.labels {
					if l.TuringPick == "" {
						continue
					}
					hv := 0
					if l.TuringPick == PickPrediction {
						hv = 1
					}
					vals = append(vals, hv)
				}
				for range w {
					for _, hv := range vals {
						a, b = append(a, hv), append(b, jv)
					}
					if len(vals) > 0 {
						au = append(au, append(slices.Clone(vals), jv))
					}
				}
				continue
			}
			if s.Failed {
				continue
			}
			jvals := s.Scores.Values()
			for _, d := range dims {
				jv := jvals[d]
				if jv <= 0 {
					continue
				}
				var vals []int
				for _, l := range u.labels {
					if hv := l.Scores.Values()[d]; hv > 0 {
						vals = append(vals, hv)
					}
				}
				for range w {
					for _, hv := range vals {
						a, b = append(a, hv), append(b, jv)
					}
					if len(vals) > 0 {
						au = append(au, append(slices.Clone(vals), jv))
					}
				}
			}
		}
		return a, b, au
	}
	dimNames := append(slices.Clone(humanDims), "turing")
	for _, j := range r.Judges {
		for di, name := range dimNames {
			a, b, au := pairsOf(j, di, nil)
			if len(a) == 0 {
				continue
			}
			h := HumanAgreement{Judge: j, Dimension: name, N: len(a), Kappa: Num(QuadraticKappa(a, b)),
				Alpha: Num(KrippendorffAlpha(au, Interval)), AlphaLevel: Interval}
			if name == "turing" {
				h.AlphaLevel = "nominal"
			}
			var ks, as []float64
			if o.Resamples > 0 && len(list) > 1 {
				rng := rand.New(rand.NewPCG(o.Seed, uint64(di+1)*0x9e3779b97f4a7c15))
				draw := make([]int, len(list))
				for range o.Resamples {
					clear(draw)
					for range list {
						draw[rng.IntN(len(list))]++
					}
					a, b, au := pairsOf(j, di, draw)
					if len(a) == 0 {
						continue
					}
					ks = append(ks, QuadraticKappa(a, b))
					as = append(as, KrippendorffAlpha(au, Interval))
				}
			}
			h.KappaCI, h.AlphaCI = toCI(percentileCI(ks)), toCI(percentileCI(as))
			r.Human = append(r.Human, h)
		}
		if !slices.ContainsFunc(r.Human, func(h HumanAgreement) bool { return h.Judge == j && h.Dimension == "turing" }) && len(turing) > 0 {
			r.Gaps = append(r.Gaps, fmt.Sprintf("judge %s gave no Turing picks: people's picks are compared with no judge (judge in Turing mode for that)", j))
		}
	}
	if r.UnmatchedLabels > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d label(s) name a prediction none of these runs holds; they are left out", r.UnmatchedLabels))
	}
	models := make([]string, 0, len(turing))
	for m := range turing {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		v := turing[m]
		tr := TuringRate{Model: m, Picks: len(v), Fooled: Num(mean(v)), FooledCI: toCI(percentileCI(nil))}
		if o.Resamples > 0 && len(v) > 1 {
			rng := rand.New(rand.NewPCG(o.Seed, 7))
			bs := make([]float64, 0, o.Resamples)
			for range o.Resamples {
				s := 0.0
				for range v {
					s += v[rng.IntN(len(v))]
				}
				bs = append(bs, s/float64(len(v)))
			}
			tr.FooledCI = toCI(percentileCI(bs))
		}
		r.Turing = append(r.Turing, tr)
	}
}
