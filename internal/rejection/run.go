package rejection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/filelock"
	"github.com/agentworld/agentworld/internal/journal"
	progressline "github.com/agentworld/agentworld/internal/progress"
	"github.com/agentworld/agentworld/internal/reward"
	"github.com/agentworld/agentworld/internal/runpin"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/workqueue"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Files of an output directory.
//
//	OUT/run.json          the run's settings (checked on resume)
//	OUT/candidates.jsonl  every beam with its reward and the decision (Candidate)
//	OUT/sft.jsonl         the kept beams as SFT chat lines (SFTLine)
//	OUT/pairs.jsonl       one preference pair per sample that has one (PairLine)
//	OUT/summary.json      input → kept counts, keep rates and reward histograms
//	OUT/journal.jsonl     every teacher answer (with its request hash) as it
//	                      arrived, and every beam once scored (resume)
//	OUT/progress.jsonl    a checkpoint after each sample's outputs (resume)
const (
	RunFile        = "run.json"
	CandidatesFile = "candidates.jsonl"
	SFTFile        = "sft.jsonl"
	PairsFile      = "pairs.jsonl"
	SummaryFile    = "summary.json"
	JournalFile    = "journal.jsonl"
	ProgressFile   = "progress.jsonl"
	lockFile       = "run.lock"
)

// Defaults of [Options].
const (
	DefaultBeams       = 4
	DefaultConcurrency = 64
	DefaultMaxTokens   = 32768
	DefaultTemperature = 1.0
)

// ErrSettingsChanged means the output directory holds a run made with other
// settings; resuming into it would mix two runs.
var ErrSettingsChanged = runpin.ErrSettingsChanged

// Options configure [Run]. Teacher, TeacherModel and Scorer are required.
type Options struct {
	// Teacher generates the beams; TeacherModel names it (requests, cache
	// keys, run.json).
	Teacher      worldmodel.Completer
	TeacherModel string
	// Scorer scores each beam against the real observation.
	Scorer *reward.Scorer
	// Beams per sample; 0 means DefaultBeams.
	Beams int
	// Concurrency bounds the teacher requests in flight; 0 means
	// DefaultConcurrency.
	Concurrency int
	// MaxTokens is the teacher's budget; 0 means DefaultMaxTokens, negative
	// sends none.
	MaxTokens int
	// Temperature nil means DefaultTemperature; TopP is sent when set.
	Temperature *float64
	TopP        *float64
	// Seed: beam b (1-based) is requested with seed Seed+b, so the beams of
	// a sample are distinct requests (and distinct cache entries).
	Seed int64
	// Policy decides what is kept; the zero value keeps one beam of any
	// reward (see DefaultPolicy for the command's default).
	Policy Policy
	// Thinking is where targets carry the reasoning; "" means ThinkInline.
	Thinking Thinking
	// Target is what an SFT target's answer is; "" means TargetTeacher.
	Target Target
	// MaxLine bounds one input line; 0 means datapipe.DefaultMaxLine.
	MaxLine int
	// Progress receives a progress line every ProgressInterval (0: 10
	// seconds; redrawn in place on a terminal, see package progress) and
	// at the end; nil shows none.
	Progress         io.Writer
	ProgressInterval time.Duration
	// Logger receives failed beams; nil discards.
	Logger *slog.Logger
	// Queue, when set, has a work queue's workers
	// ([workqueue.Coordinator], whose workers run [Worker]) generate and
	// score the beams instead of this process. Each beam is one item,
	// with the id "SEQ/BEAM" (the sample's position in the input and the
	// beam, from 1); its payload is a [BeamItem], its result the scored
	// beam as a journal line, which Run journals as it journals its own
	// beams: the outputs end byte-identical to a local run's, and a rerun
	// after a kill asks only for beams its journal lacks (the queue keeps
	// each item's result once, so a beam a worker scored meanwhile is
	// collected, not requested again). A failed item is forgotten, so a
	// rerun tries it again. Concurrency then bounds the beams out at
	// once. nil does them here.
	Queue workqueue.Dispatcher
}

// normalize fills in the defaults and checks the settings.
func (o *Options) normalize() error {
	if o.Beams <= 0 {
		o.Beams = DefaultBeams
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.Temperature == nil {
		t := DefaultTemperature
		o.Temperature = &t
	}
	if o.Thinking == "" {
		o.Thinking = ThinkInline
	}
	if _, err := ParseThinking(string(o.Thinking)); err != nil {
		return err
	}
	tg, err := ParseTarget(string(o.Target))
	if err != nil {
		return err
	}
	o.Target = tg
	return o.Policy.Validate()
}

// settings are what decides a run's outputs, recorded in run.json.
type settings struct {
	Teacher     string   `json:"teacher"`
	Judge       string   `json:"judge"`
	Beams       int      `json:"beams"`
	MaxTokens   int      `json:"max_tokens"`
	Temperature float64  `json:"temperature"`
	TopP        *float64 `json:"top_p,omitempty"`
	Seed        int64    `json:"seed"`
	Policy      Policy   `json:"policy"`
	Thinking    Thinking `json:"thinking"`
	// Target is left out for the teacher, so runs from before the
	// setting existed resume.
	Target Target   `json:"target,omitempty"`
	Inputs []string `json:"inputs"`
}

// Result is what a run did.
type Result struct {
	Summary *Summary
	// Resumed counts samples an earlier run had finished; Requests the
	// teacher requests made now; Reused the teacher answers an earlier run
	// had journaled (by request hash) but not scored.
	Resumed  int64
	Requests int64
	Reused   int64
	// Journaled counts beams an earlier run had scored but not written.
	Journaled int64
	// Workers counts, with a Queue, the beams each worker returned in
	// this call, by worker name; nil without one.
	Workers map[string]int64
	Elapsed time.Duration
}

type job struct {
	seq     int64
	s       *expand.Sample
	beams   []*Candidate
	pending atomic.Int32
	done    chan struct{}
	// prompt and record are rendered copies of the whole history that the
	// beams share (they differ only in the seed and the answer): a sample
	// holds one of each while its beams need it, not one a beam, and
	// neither while its beams wait for the journal or it waits to be
	// written.
	prompt perSample[[]worldmodel.Message]
	record perSample[*trajectory.Record]
}

// perSample is a value the beams of a sample share: built by the first
// beam that needs it, dropped when the last that will use it is done.
type perSample[T any] struct {
	once  sync.Once
	users atomic.Int32
	v     T
}

// get returns the value, building it first if no beam has.
func (p *perSample[T]) get(build func() T) T {
	p.once.Do(func() { p.v = build() })
	return p.v
}

// release says a beam no longer uses the value (each of the users calls
// it once, after its last get); after the last the job no longer holds it.
func (p *perSample[T]) release() {
	if p.users.Add(-1) == 0 {
		var zero T
		p.v = zero
	}
}

func (j *job) finish() {
	if j.pending.Add(-1) == 0 {
		close(j.done)
	}
}

// journalLine is a line of the journal: a teacher answer as it arrived
// (Answer), or a scored beam (Candidate). Key is the request's hash: on
// resume an answer is reused only for the very same request.
type journalLine struct {
	Key       string               `json:"key"`
	Seq       int64                `json:"seq"`
	Beam      int                  `json:"beam"`
	Answer    *worldmodel.Response `json:"answer,omitempty"`
	Candidate *Candidate           `json:"candidate,omitempty"`
}

// entry is a journal line on its way; a scored beam finishes its job once
// journaled.
type entry struct {
	line journalLine
	j    *job
}

// toJournal hands a line to the journal writer.
func (r *runner) toJournal(ctx context.Context, e *entry) error {
	select {
	case r.scored <- e:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type runner struct {
	o        Options
	scored   chan *entry
	out      string
	answers  map[string]*worldmodel.Response
	journal  *journal.Appender
	log      *slog.Logger
	sem      chan struct{}
	requests atomic.Int64
	reused   atomic.Int64
	// workersMu guards workers, the beams each queue worker did
	// (remoteBeam).
	workersMu sync.Mutex
	workers   map[string]int64
}

// Run samples every expanded sample of files (expand.Sample JSON lines, as
// `agentworld data expand` writes) into out. See the package doc.
func Run(ctx context.Context, files []string, out string, opts *Options) (*Result, error) {
	start := time.Now()
	if opts == nil || opts.Teacher == nil || opts.TeacherModel == "" || opts.Scorer == nil {
		return nil, errors.New("rejection: a teacher, its model name and a scorer are required")
	}
	if len(files) == 0 {
		return nil, errors.New("rejection: no input files")
	}
	r := &runner{o: *opts, out: out, log: opts.Logger}
	if err := r.o.normalize(); err != nil {
		return nil, err
	}
	o := &r.o
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	lock, err := filelock.Acquire(filepath.Join(out, lockFile), "sampling directory "+out)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	if err := r.checkSettings(files); err != nil {
		return nil, err
	}

	// Where an earlier run stopped.
	paths := [3]string{filepath.Join(out, CandidatesFile), filepath.Join(out, SFTFile), filepath.Join(out, PairsFile)}
	cp, err := lastCheckpoint(filepath.Join(out, ProgressFile), [3]int64{fileSize(paths[0]), fileSize(paths[1]), fileSize(paths[2])})
	if err != nil {
		return nil, err
	}
	journaled, answers, err := readJournal(filepath.Join(out, JournalFile), cp.Next)
	if err != nil {
		return nil, err
	}
	r.answers = answers
	res := &Result{Resumed: cp.Next}
	var outs [3]*output
	var progress *journal.Appender
	closeAll := func() error {
		var errs []error
		for _, o := range outs {
			if o != nil {
				errs = append(errs, o.Close())
			}
		}
		for _, a := range []*journal.Appender{progress, r.journal} {
			if a != nil {
				errs = append(errs, a.Close())
			}
		}
		return errors.Join(errs...)
	}
	for i, p := range paths {
		if outs[i], err = openOutput(p, [3]int64{cp.Candidates, cp.SFT, cp.Pairs}[i]); err != nil {
			closeAll()
			return nil, err
		}
	}
	if progress, err = journal.Open(filepath.Join(out, ProgressFile), syncInterval); err != nil {
		closeAll()
		return nil, err
	}
	if r.journal, err = journal.Open(filepath.Join(out, JournalFile), syncInterval); err != nil {
		closeAll()
		return nil, err
	}

	prog := newProgress(cp.Next)
	ticker := progressline.Start(o.Progress, o.ProgressInterval, prog.line)
	// The input is counted for the progress line while the sampling goes
	// on, not first: a pass over a large input before the first request
	// delayed the whole run. The count's errors are the reader's too, which
	// reports them with the sample's context.
	countCtx, stopCount := context.WithCancel(ctx)
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		if n, err := countSamples(countCtx, files, o.MaxLine); err == nil {
			prog.setTotal(n)
		}
	}()
	r.sem = make(chan struct{}, o.Concurrency)
	window := make(chan *job, windowSize(o.Concurrency, o.Beams))
	g, gctx := errgroup.WithContext(ctx)
	r.scored = make(chan *entry, 2*windowSize(o.Concurrency, o.Beams)*o.Beams)
	g.Go(func() error {
		var beams sync.WaitGroup
		defer func() {
			close(window)
			beams.Wait()
			close(r.scored)
		}()
		return r.read(gctx, g, &beams, files, cp.Next, journaled, window, &res.Journaled)
	})
	g.Go(func() error { return r.journalBeams(gctx) })
	g.Go(func() error { return r.sink(gctx, window, outs, progress, prog) })
	werr := g.Wait()
	if werr != nil {
		stopCount()
	}
	// A finished run's last progress line has the total.
	<-counted
	stopCount()
	ticker.Stop()
	cerr := closeAll()
	res.Requests, res.Reused = r.requests.Load(), r.reused.Load()
	r.workersMu.Lock()
	res.Workers = r.workers
	r.workersMu.Unlock()
	if err := errors.Join(werr, cerr); err != nil {
		res.Elapsed = time.Since(start)
		if ctx.Err() != nil {
			return res, fmt.Errorf("sampling interrupted (finished beams are kept; rerun to resume): %w", ctx.Err())
		}
		return res, err
	}
	sum, err := Summarize(paths[0], o.Policy, o.Beams, o.Target)
	if err != nil {
		return res, err
	}
	sum.Teacher, sum.Judge = o.TeacherModel, o.Scorer.JudgeModel()
	sum.PairsWritten = countLines(paths[2])
	res.Summary = sum
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return res, err
	}
	if err := atomicfile.WriteFile(filepath.Join(out, SummaryFile), append(b, '\n'), nil); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// read streams the input, skipping the samples already written, and starts
// each sample's beams as it enters the window.
func (r *runner) read(ctx context.Context, g *errgroup.Group, beams *sync.WaitGroup, files []string, skip int64, journaled map[int64]map[int]*Candidate, window chan<- *job, resumedBeams *int64) error {
	var seq int64
	return eachLine(files, r.o.MaxLine, func(b []byte, file string, line int) error {
		defer func() { seq++ }()
		if seq < skip {
			return nil
		}
		var s expand.Sample
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("%s:%d: not an expanded sample (agentworld data expand writes them): %v", file, line, err)
		}
		if s.TrajectoryID == "" || s.Turn < 1 || s.Action == "" {
			return fmt.Errorf("%s:%d: not an expanded sample: trajectory_id, turn and action are required", file, line)
		}
		j := &job{seq: seq, s: &s, beams: make([]*Candidate, r.o.Beams), done: make(chan struct{})}
		j.pending.Store(int32(r.o.Beams))
		// Beams an earlier run scored use neither.
		users := int32(r.o.Beams - len(journaled[seq]))
		j.prompt.users.Store(users)
		j.record.users.Store(users)
		select {
		case window <- j:
		case <-ctx.Done():
			return ctx.Err()
		}
		for b := 1; b <= r.o.Beams; b++ {
			if c := journaled[seq][b]; c != nil {
				j.beams[b-1] = c
				*resumedBeams++
				j.finish()
				continue
			}
			select {
			case r.sem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			beams.Add(1)
			g.Go(func() error {
				defer beams.Done()
				// A failed beam never finishes its job: the writer then
				// stops on the cancelled context instead of writing it.
				c, err := r.beam(ctx, j, b)
				if err != nil {
					return err
				}
				j.beams[b-1] = c
				return r.toJournal(ctx, &entry{line: journalLine{Key: c.key, Seq: j.seq, Beam: b, Candidate: c}, j: j})
			})
		}
		delete(journaled, seq)
		return nil
	})
}

// journalBeams appends scored beams to the journal, every beam already
// waiting in one write (up to maxBatch lines or flushBytes), and then
// finishes them: a beam counts as done only once a rerun would find it.
func (r *runner) journalBeams(ctx context.Context) error {
	var buf []byte
	var pending []*entry
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if err := r.journal.AppendLines(buf); err != nil {
			return err
		}
		for _, e := range pending {
			if e.j != nil {
				e.j.finish()
			}
		}
		clear(pending)
		pending = pending[:0]
		if cap(buf) > 2*flushBytes {
			buf = nil
		}
		buf = buf[:0]
		return nil
	}
	for {
		var e *entry
		var ok bool
		select {
		case e, ok = <-r.scored:
		default:
			if err := flush(); err != nil {
				return err
			}
			select {
			case e, ok = <-r.scored:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if !ok {
			return flush()
		}
		b, err := trajectory.Marshal(e.line)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
		pending = append(pending, e)
		if len(pending) >= maxBatch || len(buf) >= flushBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// maxBatch bounds the finished samples written at once; flushBytes the
// lines buffered before they are written. The byte bound is what keeps the
// writer's buffers flat: bounded by samples alone they would grow to the
// largest run of finished samples the run ever meets (up to the window's
// samples with their whole histories, twice over in the SFT and pairs
// lines), which a longer input is merely more likely to reach.
const (
	maxBatch   = 256
	flushBytes = 1 << 20
)

// sink writes finished samples in input order. It renders every sample
// already finished at the head of the window and writes their lines with
// one write per file, then one checkpoint, once nothing more is ready or
// flushBytes are buffered: per-line writes would make the writer, not the
// teacher, the bound of a fast run.
func (r *runner) sink(ctx context.Context, window <-chan *job, outs [3]*output, progress *journal.Appender, prog *progress) error {
	var bufs [3][]byte
	var rendered []*job
	flush := func() error {
		if len(rendered) == 0 {
			return nil
		}
		for i, a := range outs {
			if err := a.write(bufs[i]); err != nil {
				return err
			}
		}
		last := rendered[len(rendered)-1]
		if err := progress.Append(checkpoint{Next: last.seq + 1, Candidates: outs[0].size, SFT: outs[1].size, Pairs: outs[2].size}); err != nil {
			return err
		}
		for _, j := range rendered {
			prog.add(j)
		}
		clear(rendered)
		rendered = rendered[:0]
		for i := range bufs {
			// One huge sample may have grown a buffer; it is not kept.
			if cap(bufs[i]) > 2*flushBytes {
				bufs[i] = nil
			}
			bufs[i] = bufs[i][:0]
		}
		return nil
	}
	for {
		var j *job
		var ok bool
		select {
		case j, ok = <-window:
		default:
			// Nothing more is in the window: write what is rendered
			// before waiting.
			if err := flush(); err != nil {
				return err
			}
			j, ok = <-window
		}
		if !ok {
			return flush()
		}
		select {
		case <-j.done:
		default:
			if err := flush(); err != nil {
				return err
			}
			select {
			case <-j.done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var err error
		if bufs, err = r.render(j, bufs); err != nil {
			return err
		}
		rendered = append(rendered, j)
		if len(rendered) >= maxBatch || len(bufs[0])+len(bufs[1])+len(bufs[2]) >= flushBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// render applies the policy to a finished sample and appends its lines to
// the candidates, SFT and pairs buffers.
func (r *runner) render(j *job, bufs [3][]byte) ([3][]byte, error) {
	beams := make([]Beam, len(j.beams))
	for i, c := range j.beams {
		beams[i] = c.beam()
	}
	d := r.o.Policy.Select(beams)
	add := func(i int, v any) error {
		b, err := trajectory.Marshal(v)
		if err != nil {
			return err
		}
		bufs[i] = append(append(bufs[i], b...), '\n')
		return nil
	}
	for i, c := range j.beams {
		c.Rank, c.Kept, c.Chosen, c.Rejected = d.Rank[i], d.Kept[i], i == d.Chosen, i == d.Rejected
		if err := add(0, c); err != nil {
			return bufs, err
		}
	}
	for i, c := range j.beams {
		if d.Kept[i] {
			if err := add(1, sftLine(j.s, c, r.o.Thinking, r.o.Target)); err != nil {
				return bufs, err
			}
		}
	}
	if d.Chosen >= 0 {
		if err := add(2, pairLine(j.s, j.beams[d.Chosen], j.beams[d.Rejected], r.o.Thinking)); err != nil {
			return bufs, err
		}
	}
	return bufs, nil
}

// checkSettings refuses an output directory of a run with other settings,
// then records this run's.
func (r *runner) checkSettings(files []string) error {
	o := &r.o
	st := settings{Teacher: o.TeacherModel, Judge: o.Scorer.JudgeModel(), Beams: o.Beams, MaxTokens: o.MaxTokens,
		Temperature: *o.Temperature, TopP: o.TopP, Seed: o.Seed, Policy: o.Policy, Thinking: o.Thinking}
	if o.Target != TargetTeacher {
		st.Target = o.Target
	}
	for _, f := range files {
		if abs, err := filepath.Abs(f); err == nil {
			f = abs
		}
		st.Inputs = append(st.Inputs, f)
	}
	return runpin.Check(r.out, RunFile, st)
}

// windowSize is how many samples may be between the reader and the
// writer: enough for the in-flight bound to stay full while finished
// samples wait for a slower one ahead of them (outputs are in input order)
// and answered beams are cached and scored, and no more, since the window
// is what the run holds in memory.
func windowSize(concurrency, beams int) int {
	return 4*((concurrency+beams-1)/beams) + 4
}
