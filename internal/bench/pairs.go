package bench

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"text/tabwriter"

	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Judge modes (--judge-mode). Pointwise scores each prediction on the five
// dimensions; the pairwise modes ask a question about two observations.
const (
	ModePointwise = "pointwise"
	// ModeTuring shows the real observation and the prediction, in an
	// order drawn from the seed, and asks which is the real one.
	ModeTuring = "turing"
	// ModeReference shows the world model's prediction and a reference
	// model's with the ground truth and asks which is closer to it.
	ModeReference = "reference"
)

// What Response A of a pairwise judgment was.
const (
	SideReal       = "real"       // turing: the real observation
	SidePrediction = "prediction" // turing: the world model's prediction
	SideModel      = "model"      // reference: the world model's prediction
	SideReference  = "reference"  // reference: the reference model's
)

// FailNoReference marks a sample the reference mode cannot judge: the
// reference predictions have no usable prediction for it.
const FailNoReference = "no_reference"

// PairRubric is the LLM judge's side of the pairwise modes: the
// conversation showing two observations as Response A and B, and the
// strict reading of the answer's letter.
type PairRubric interface {
	PairMessages(mode string, rec *trajectory.Record, a, b string) (msgs []worldmodel.Message, generic bool)
	// ParseChoice returns "A" or "B"; an error means the attempt failed
	// and is retried.
	ParseChoice(output string) (string, error)
}

// PairVerdict is what the judge answered about one sample in a pairwise
// mode: one judgment per order asked (two with both orders).
type PairVerdict struct {
	Judgments []PairJudgment `json:"judgments"`
}

// PairJudgment is one question and its answer.
type PairJudgment struct {
	// A is what Response A was (SideReal or SidePrediction in turing mode,
	// SideModel or SideReference in reference mode); B was the other.
	A string `json:"a"`
	// Answer is the judge's letter, "A" or "B"; "" when it never parsed.
	Answer   string `json:"answer,omitempty"`
	Output   string `json:"output,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
}

// Hit reports whether the judge picked the side the mode counts: the real
// observation (turing: the judge detected the simulation) or the world
// model's prediction (reference: judged closer to the truth).
func (p PairJudgment) Hit() bool {
	aIsTarget := p.A == SideReal || p.A == SideModel
	return (p.Answer == "A") == aIsTarget
}

// flipped reports judgments of one sample in both orders that picked
// different sides.
func (v *PairVerdict) flipped() (both, flip bool) {
	if v == nil || len(v.Judgments) != 2 || v.Judgments[0].Answer == "" || v.Judgments[1].Answer == "" {
		return false, false
	}
	return true, v.Judgments[0].Hit() != v.Judgments[1].Hit()
}

// realFirst draws whether the real observation is Response A for a sample:
// a hash of the seed and the sample's identity, so a rerun asks the same.
func realFirst(seed uint64, sample string) bool {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(sample))
	return h.Sum(nil)[0]&1 == 0
}

// judgePair judges one sample in a pairwise mode: one question per order;
// every answered order is kept in the row even when another never parsed.
func (jd *judger) judgePair(ctx context.Context, rec *trajectory.Record, p Prediction, j Judged) (Judged, error) {
	j.JudgeMode = jd.mode
	type side struct{ name, text string }
	var first, second side
	switch jd.mode {
	case ModeTuring:
		real, pred := side{SideReal, rec.GroundTruth()}, side{SidePrediction, p.Prediction}
		first, second = pred, real
		if realFirst(jd.seed, p.Sample) {
			first, second = real, pred
		}
	case ModeReference:
		ref := jd.refs[p.Sample]
		if ref == nil || ref.Failure != "" {
			why := "has no row for it"
			if ref != nil {
				why = "failed on it (" + ref.Failure + ")"
			}
			j.Failure, j.Error = FailNoReference, fmt.Sprintf("sample %s (%s:%d): the reference predictions %s", p.Sample, p.File, p.Line, why)
			return j, nil
		}
		first, second = side{SideModel, p.Prediction}, side{SideReference, ref.Prediction}
	}
	orders := [][2]side{{first, second}}
	if jd.both {
		orders = append(orders, [2]side{second, first})
	}
	// Both orders are asked at once: they are independent questions, and
	// a sample then waits for one judge latency instead of two (the
	// endpoint sees up to two requests per sample in flight).
	type result struct {
		a       answer
		letter  string
		generic bool
		err     error
	}
	res := make([]result, len(orders))
	var wg sync.WaitGroup
	for i, o := range orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs, generic := jd.pair.PairMessages(jd.mode, rec, o[0].text, o[1].text)
			r := &res[i]
			r.generic = generic
			r.a, r.err = jd.ask(ctx, msgs, func(out string) (err error) {
				r.letter, err = jd.pair.ParseChoice(out)
				return err
			})
		}()
	}
	wg.Wait()
	j.Pair = &PairVerdict{}
	for i, o := range orders {
		r := res[i]
		if r.err != nil {
			return j, r.err
		}
		j.GenericJudge = r.generic
		pj := PairJudgment{A: o[0].name, Output: r.a.output, Attempts: r.a.attempts}
		j.Attempts += r.a.attempts
		j.JudgeOutput = r.a.output
		if r.a.ok {
			pj.Answer = r.letter
		} else if j.Failure == "" {
			j.Failure, j.Error = r.a.failure(jd, p)
		}
		j.Pair.Judgments = append(j.Pair.Judgments, pj)
	}
	return j, nil
}

// PairScore is one domain's (or the overall) line of a pairwise report.
// Rates are percentages over judgments (two per sample with both orders).
type PairScore struct {
	N      int `json:"n"`
	Valid  int `json:"valid"`
	Failed int `json:"failed"`
	// Judgments counts the answers the rate stands on.
	Judgments int `json:"judgments"`
	// Rate is the detection rate (turing: the share of answers naming the
	// real observation; 50 means indistinguishable) or the win rate
	// (reference: the share judging the world model closer to the truth).
	Rate Num      `json:"rate"`
	CI95 Interval `json:"ci95"`
	// PositionA is the share of answers that were "A" (50 = no position
	// bias).
	PositionA Num `json:"position_a"`
	// Pairs counts samples answered in both orders; FlipRate is the share
	// of them whose two answers picked different sides.
	Pairs    int `json:"pairs,omitempty"`
	FlipRate Num `json:"flip_rate"`
}

// PairReport is the score of a pairwise run.
type PairReport struct {
	Mode    string                `json:"mode"`
	Domains map[string]*PairScore `json:"domains"`
	// Overall pools every judgment; DomainMean is the unweighted mean of
	// the domain rates.
	Overall    *PairScore `json:"overall"`
	DomainMean Num        `json:"domain_mean"`
	BothOrders bool       `json:"both_orders"`
}

// pairCluster accumulates one trajectory's judgments.
type pairCluster struct{ hits, n float64 }

// scorePairs computes the pairwise report. Failed samples are left out
// (counted), or with strict counted as one judgment per order against the
// world model (turing: detected; reference: not closer). Intervals come
// from the bootstrap over trajectories of Score.
func scorePairs(rows []*Judged, mode string, strict bool, resamples int, seed uint64) *PairReport {
	pr := &PairReport{Mode: mode, Domains: map[string]*PairScore{}, Overall: &PairScore{}}
	clusters := map[string]map[string]*pairCluster{}
	aAnswers, answered := map[string]int{}, map[string]int{}
	flips := map[string]int{}
	all := func(d string, f func(*PairScore)) { f(pr.Domains[d]); f(pr.Overall) }
	for _, j := range rows {
		if j.Pair != nil && len(j.Pair.Judgments) == 2 {
			pr.BothOrders = true
		}
	}
	for _, j := range rows {
		d := DomainOf(j)
		if pr.Domains[d] == nil {
			pr.Domains[d] = &PairScore{}
			clusters[d] = map[string]*pairCluster{}
		}
		all(d, func(s *PairScore) { s.N++ })
		key := j.Task + "\x00" + j.ID
		c := clusters[d][key]
		if c == nil {
			c = &pairCluster{}
			clusters[d][key] = c
		}
		if !j.pairValid() {
			all(d, func(s *PairScore) { s.Failed++ })
			if strict {
				n := 1
				if pr.BothOrders {
					n = 2
				}
				if mode == ModeTuring {
					c.hits += float64(n)
				}
				c.n += float64(n)
				all(d, func(s *PairScore) { s.Judgments += n })
			}
			continue
		}
		all(d, func(s *PairScore) { s.Valid++ })
		for _, pj := range j.Pair.Judgments {
			if pj.Hit() {
				c.hits++
			}
			c.n++
			answered[d]++
			answered[""]++
			if pj.Answer == "A" {
				aAnswers[d]++
				aAnswers[""]++
			}
			all(d, func(s *PairScore) { s.Judgments++ })
		}
		if both, flip := j.Pair.flipped(); both {
			all(d, func(s *PairScore) { s.Pairs++ })
			if flip {
				flips[d]++
				flips[""]++
			}
		}
	}
	order := domainOrderPairs(pr.Domains)
	lists := make([][]*pairCluster, len(order))
	for i, d := range order {
		keys := make([]string, 0, len(clusters[d]))
		for k := range clusters[d] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lists[i] = append(lists[i], clusters[d][k])
		}
	}
	ratio := func(cs ...[]*pairCluster) float64 {
		var h, n float64
		for _, l := range cs {
			for _, c := range l {
				h, n = h+c.hits, n+c.n
			}
		}
		if n == 0 {
			return math.NaN()
		}
		return 100 * h / n
	}
	share := func(k, n int) Num {
		if n == 0 {
			return Num(math.NaN())
		}
		return Num(100 * float64(k) / float64(n))
	}
	sum, cnt := 0.0, 0
	for i, d := range order {
		s := pr.Domains[d]
		s.Rate = Num(ratio(lists[i]))
		s.PositionA = share(aAnswers[d], answered[d])
		s.FlipRate = share(flips[d], s.Pairs)
		if !math.IsNaN(float64(s.Rate)) {
			sum += float64(s.Rate)
			cnt++
		}
	}
	pr.DomainMean = Num(math.NaN())
	if cnt > 0 {
		pr.DomainMean = Num(sum / float64(cnt))
	}
	pr.Overall.Rate = Num(ratio(lists...))
	pr.Overall.PositionA = share(aAnswers[""], answered[""])
	pr.Overall.FlipRate = share(flips[""], pr.Overall.Pairs)

	// Bootstrap over trajectories, within each domain.
	nan := Num(math.NaN())
	for _, s := range pr.Domains {
		s.CI95 = [2]Num{nan, nan}
	}
	pr.Overall.CI95 = [2]Num{nan, nan}
	if resamples <= 0 {
		return pr
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	per := make([][]float64, len(order))
	var overall []float64
	overallKnown := len(order) > 0
	for _, l := range lists {
		if len(l) < 2 {
			overallKnown = false
		}
	}
	draw := make([][]*pairCluster, len(order))
	for b := 0; b < resamples; b++ {
		for i, l := range lists {
			draw[i] = draw[i][:0]
			for range l {
				draw[i] = append(draw[i], l[rng.IntN(len(l))])
			}
			if len(l) >= 2 {
				per[i] = append(per[i], ratio(draw[i]))
			}
		}
		if overallKnown {
			overall = append(overall, ratio(draw...))
		}
	}
	for i, d := range order {
		pr.Domains[d].CI95 = interval(per[i])
	}
	pr.Overall.CI95 = interval(overall)
	return pr
}

func domainOrderPairs(m map[string]*PairScore) []string {
	ds := make(map[string]*DomainScore, len(m))
	for d := range m {
		ds[d] = nil
	}
	return domainOrder(ds)
}

// question says what the rate measures, for the text and HTML reports.
func (pr *PairReport) question() (title, rate, meaning string) {
	if pr.Mode == ModeTuring {
		return "Turing test: can the judge tell the real observation from the prediction?", "detection %",
			"detection = share of answers naming the real observation; 50% means the judge cannot tell them apart, 100% that it always can"
	}
	return "Reference comparison: is the world model's prediction closer to the truth than the reference's?", "model closer %",
		"model closer = share of answers judging the world model's prediction closer to the ground truth than the reference model's; 50% means a tie"
}

// writeText renders a pairwise report.
func (pr *PairReport) writeText(ew *errWriter, label string) error {
	title, rate, meaning := pr.question()
	if label != "" {
		title = label + ": " + title
	}
	ew.printf("AgentWorldBench %s\n%s\n", title, meaning)
	ew.printf("position A = share of \"A\" answers (50%% = no position bias)")
	if pr.BothOrders {
		ew.printf("; flip = share of samples judged in both orders whose answers picked different sides")
	}
	ew.printf("\n\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "domain\tn\tvalid\tfailed\tjudgments\t%s\t95%% CI\tposition A %%\tflip %%\t\n", rate)
	line := func(name string, s *PairScore) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", name, s.N, s.Valid, s.Failed, s.Judgments, s.Rate, ciText(s.CI95), s.PositionA, s.FlipRate)
	}
	for _, d := range domainOrderPairs(pr.Domains) {
		line(d, pr.Domains[d])
	}
	line("overall", pr.Overall)
	if err := tw.Flush(); err != nil {
		return err
	}
	ew.printf("\noverall pools every judgment; mean of the domain rates: %s\n", pr.DomainMean)
	ew.printf("CIs: bootstrap over trajectories ((task, id) clusters)\n")
	return ew.err
}

// setMode configures the judge mode of jd from o, refusing combinations
// that cannot work, and loads the reference predictions.
func (jd *judger) setMode(o *Options) error {
	jd.mode = o.JudgeMode
	if jd.mode == "" {
		jd.mode = ModePointwise
	}
	switch jd.mode {
	case ModePointwise:
		if o.BothOrders || o.Reference != "" {
			return errors.New("bench: both orders and reference predictions belong to the pairwise judge modes (turing, reference)")
		}
		return nil
	case ModeTuring, ModeReference:
	default:
		return fmt.Errorf("bench: unknown judge mode %q (want pointwise, turing or reference)", jd.mode)
	}
	if jd.rules != nil {
		return fmt.Errorf("bench: the %s judge mode needs an LLM judge, not the rules scorer", jd.mode)
	}
	pair, ok := o.Rubric.(PairRubric)
	if !ok {
		return fmt.Errorf("bench: the rubric cannot build %s conversations", jd.mode)
	}
	jd.pair, jd.both, jd.seed = pair, o.BothOrders, o.OrderSeed
	if jd.seed == 0 {
		jd.seed = DefaultSeed
	}
	if jd.mode == ModeTuring {
		if o.Reference != "" {
			return errors.New("bench: reference predictions belong to the reference judge mode, not turing")
		}
		return nil
	}
	if o.Reference == "" {
		return errors.New("bench: the reference judge mode needs the reference model's predictions (--reference FILE)")
	}
	if _, err := os.Stat(o.Reference); err != nil {
		return fmt.Errorf("reference predictions: %w", err)
	}
	if o.BothOrders && o.JudgeText != nil && o.JudgeText.Digest != "" {
		return errors.New("bench: --both-orders cannot swap the responses with the official reference template, which tells the judge that Response A is the world model's; it is only offered with agentworld's text")
	}
	jd.refs = map[string]*Prediction{}
	if err := scanRows(o.Reference, func(k rowKey, raw []byte, _ int64) error {
		var pr Prediction
		if err := json.Unmarshal(raw, &pr); err != nil {
			return fmt.Errorf("%s: sample %s: %w", o.Reference, k.Sample, err)
		}
		jd.refs[k.Sample] = &pr
		return nil
	}); err != nil {
		return fmt.Errorf("reference predictions: %w", err)
	}
	if len(jd.refs) == 0 {
		return fmt.Errorf("reference predictions %s: no rows", o.Reference)
	}
	return nil
}

// fileSHA256 is the SHA-256 of a file's content, in hex.
func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// pairValid reports a pairwise row whose every question was answered.
func (j *Judged) pairValid() bool {
	return j.Failure == "" && j.Pair != nil && len(j.Pair.Judgments) > 0
}

// Title, RateLabel and Meaning say what a pairwise report measures.
func (pr *PairReport) Title() string { t, _, _ := pr.question(); return t }

// RateLabel names the rate column.
func (pr *PairReport) RateLabel() string { _, r, _ := pr.question(); return r }

// Meaning says how to read the rate.
func (pr *PairReport) Meaning() string { _, _, m := pr.question(); return m }

// PairRow is one line of a pairwise table.
type PairRow struct {
	Name string
	S    *PairScore
}

// Rows lists the domains in leaderboard order, then the overall line.
func (pr *PairReport) Rows() []PairRow {
	var out []PairRow
	for _, d := range domainOrderPairs(pr.Domains) {
		out = append(out, PairRow{d, pr.Domains[d]})
	}
	return append(out, PairRow{"overall", pr.Overall})
}
