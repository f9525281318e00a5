package bench

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

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/journal"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Files of a run's output directory.
//
//	OUT/run.json           settings of the run's stages (checked on resume)
//	OUT/predictions.jsonl  one Prediction per sample
//	OUT/judged.jsonl       one Judged row per sample
//	OUT/scores.json        the score report (what `bench score --json` prints)
//	OUT/cache/             cached model and judge responses (see Cache)
const (
	RunFile         = "run.json"
	PredictionsFile = "predictions.jsonl"
	JudgedFile      = "judged.jsonl"
	ScoresFile      = "scores.json"
	CacheDir        = "cache"
)

// DefaultConcurrency is the number of samples in flight by default.
const DefaultConcurrency = 32

// ErrSettingsChanged means an output directory already holds results made
// with different settings; resuming into it would mix two runs.
var ErrSettingsChanged = errors.New("output directory holds a run with different settings")

// ErrBackendDown stops a run whose model or judge endpoint failed many
// samples in a row: continuing would only write failure rows. Finished
// samples are kept and failed ones are retried by the next run.
var ErrBackendDown = errors.New("endpoint keeps failing")

// Options configure a pipeline run. Which stages run follows from what is
// set: Model runs inference; Rubric (with JudgeModel) or Rules runs judging.
type Options struct {
	// Data is a data dir (every *_test.jsonl) or one JSONL file. Required.
	Data string
	// Out is the output directory. Required.
	Out string
	// SkipBad passes over malformed lines, counting them; false stops at the
	// first one with an error naming file:line.
	SkipBad bool
	// Concurrency is the number of samples in flight (waiting on the model
	// or judge endpoint; a sample the offline Rules judge scores gives its
	// place to the next one once its prediction is in); 0 means
	// DefaultConcurrency.
	Concurrency int

	// Model is the world model under test; nil skips inference and judges
	// the rows of Predictions.
	Model worldmodel.Completer
	// ModelName names the model in rows and cache keys; ModelURL is only
	// recorded in run.json.
	ModelName, ModelURL string
	// Infer are the generation parameters (zero value: published defaults).
	Infer InferSettings
	// Template re-renders every row's system prompt under a world-model
	// template version before inference (bench --template); nil sends each
	// row's system_str as it is, as published.
	Template *Template
	// Predictions is the file judged when Model is nil; "" means
	// Out/predictions.jsonl.
	Predictions string

	// JudgeModel with Rubric is the LLM judge; Rules replaces both with the
	// offline scorer. Neither set: inference only.
	JudgeModel worldmodel.Completer
	Rubric     Rubric
	Rules      RuleJudge
	// JudgeText says which text the Rubric gives the judge; it is recorded
	// in run.json, every judged row and the report. nil means agentworld's
	// own text (score.OwnPromptsLabel).
	JudgeText *score.JudgeText
	// JudgeName names the judge model in rows and cache keys; JudgeURL is
	// only recorded in run.json.
	JudgeName, JudgeURL string
	// Judge are the judge's generation parameters (zero value: none sent).
	Judge JudgeSettings
	// JudgeMode is ModePointwise (""), ModeTuring or ModeReference. The
	// pairwise modes need a Rubric that is also a PairRubric.
	JudgeMode string
	// BothOrders asks every pairwise question in both orders (two judge
	// calls per sample) and reports the flip rate. It is refused in
	// reference mode with the official text, whose template says which
	// response is the world model's.
	BothOrders bool
	// OrderSeed decides, per sample, whether the real observation is
	// Response A in turing mode; 0 means DefaultSeed.
	OrderSeed uint64
	// Reference is the reference model's predictions file (a
	// predictions.jsonl of the same data), required in reference mode.
	Reference string
	// JudgeAttempts per sample; 0 means DefaultJudgeAttempts.
	JudgeAttempts int
	// JudgeRetryWait is the wait before a judge attempt that follows a
	// transport failure (times the attempt number); 0 means 2 seconds.
	JudgeRetryWait time.Duration

	// MaxConsecutiveFailures stops the run with ErrBackendDown after that
	// many samples in a row failed on an endpoint (transport failures);
	// 0 means max(10, 2×Concurrency), negative never stops.
	MaxConsecutiveFailures int

	// RetryFailed judges again the samples an earlier run into Out judged
	// without ever getting a parseable verdict (judge_unparseable); false
	// keeps them as failed. Endpoint failures are retried either way.
	RetryFailed bool
	// Strict scores failed samples as the lowest score instead of excluding
	// them (ScoreOptions.Strict) in the report Run writes.
	Strict bool

	// Cache stores responses; nil calls the endpoints every time.
	Cache *answercache.Cache
	// Remote, when set, does the samples in other processes (see
	// [Remote]); nil does them here.
	Remote Remote
	// Progress receives the progress display; nil shows none.
	Progress io.Writer
	// ProgressInterval is how often a non-terminal progress line is written;
	// 0 means 10 seconds.
	ProgressInterval time.Duration
	// Logger receives per-sample failures; nil discards them.
	Logger *slog.Logger
}

// Summary is what a run did.
type Summary struct {
	// Total is the number of samples of the run; Done counts those finished,
	// Resumed those already finished by an earlier run.
	Total, Done, Resumed int
	// Failed counts failed samples by reason.
	Failed map[string]int
	// Truncated counts generations cut by the token budget (failed or not).
	Truncated int
	// Unpredicted counts data rows with no prediction when only judging.
	Unpredicted int
	// GenericJudge counts samples of unknown domains judged generically.
	GenericJudge int
	// Source is what reading the data met (malformed lines skipped, …).
	Source SourceStats
	// CacheHits and CacheMisses count response-cache lookups;
	// CacheCorrupt the damaged cache lines skipped ([Cache.Corrupt]), in
	// CacheDir.
	CacheHits, CacheMisses, CacheCorrupt int64
	CacheDir                             string
	Elapsed                              time.Duration
	// PredictionsPath and JudgedPath are the final files ("" when the stage
	// did not run).
	PredictionsPath, JudgedPath string
	// Errors holds the first few per-sample failure messages.
	Errors []string
	// Report is the score of the judged file (nil when nothing was judged);
	// it is also written to OUT/scores.json.
	Report *Report
}

type pipeline struct {
	o        *Options
	log      *slog.Logger
	inf      *inferer
	jd       *judger
	preds    *journal.Appender
	judged   *journal.Appender
	progress *progress

	mu  sync.Mutex
	sum Summary

	truncated, generic atomic.Int64
	consecutive        atomic.Int64
	maxConsecutive     int64
}

// Run runs the configured stages over the data as one streaming pipeline:
// each sample is judged as soon as its prediction arrives, results are
// appended line by line as they come, samples finished by an earlier run
// into the same Out are skipped, and at the end the result files are
// rewritten sorted by data file and line. A failed sample never stops the
// run; it is written with its reason. Run returns an error for bad input
// (without SkipBad), unusable options or cancellation; everything finished
// before it is kept.
func Run(ctx context.Context, o *Options) (*Summary, error) {
	start := time.Now()
	if o.Data == "" || o.Out == "" {
		return nil, errors.New("bench: data and out are required")
	}
	p := &pipeline{o: o, log: o.Logger}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.sum.Failed = map[string]int{}
	conc := o.Concurrency
	if conc <= 0 {
		conc = DefaultConcurrency
	}
	p.maxConsecutive = int64(o.MaxConsecutiveFailures)
	if p.maxConsecutive == 0 {
		p.maxConsecutive = int64(max(10, 2*conc))
	}
	var err error
	if p.inf, p.jd, err = stages(o); err != nil {
		return nil, err
	}
	if p.inf == nil && p.jd == nil {
		return nil, errors.New("bench: nothing to do: no model and no judge")
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	lock, lockErr := lockRunDir(o.Out)
	if lockErr != nil {
		return nil, lockErr
	}
	defer lock.Release()
	if err := p.checkMeta(); err != nil {
		return nil, err
	}

	// What earlier runs finished.
	predPath := filepath.Join(o.Out, PredictionsFile)
	judgedPath := filepath.Join(o.Out, JudgedFile)
	judgedDone := map[string]bool{}
	if p.jd != nil {
		if err := scanRows(judgedPath, func(k rowKey, _ []byte, _ int64) error {
			judgedDone[k.Sample] = !k.retryable() && !(o.RetryFailed && k.Failure == FailJudgeUnparsable)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
	}
	srcPreds := predPath
	if p.inf == nil && o.Predictions != "" {
		srcPreds = o.Predictions
	}
	predDone := map[string]bool{}
	pending := map[string]*Prediction{}
	if err := scanRows(srcPreds, func(k rowKey, raw []byte, _ int64) error {
		if k.retryable() && p.inf != nil {
			delete(pending, k.Sample)
			predDone[k.Sample] = false
			return nil
		}
		predDone[k.Sample] = true
		if p.jd != nil && !judgedDone[k.Sample] {
			var pr Prediction
			if err := json.Unmarshal(raw, &pr); err != nil {
				return fmt.Errorf("%s: sample %s: %w", srcPreds, k.Sample, err)
			}
			pending[k.Sample] = &pr
		} else {
			delete(pending, k.Sample)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if p.inf == nil {
		if _, err := os.Stat(srcPreds); err != nil {
			return nil, fmt.Errorf("bench: predictions: %w", err)
		}
	}

	total := len(predDone)
	if p.inf != nil {
		// Counting the rows reads the whole data (160 MB for the published
		// set) and only feeds the progress total, so it runs beside the
		// first requests (see below); that the data is there is checked
		// before anything is written.
		if _, err := trajectory.DataFiles(o.Data); err != nil {
			return nil, fmt.Errorf("data %s: %w", o.Data, err)
		}
		total = 0
	}

	if p.inf != nil {
		if p.preds, err = journal.Open(predPath, SyncInterval); err != nil {
			return nil, err
		}
	}
	if p.jd != nil {
		if p.judged, err = journal.Open(judgedPath, SyncInterval); err != nil {
			if p.preds != nil {
				p.preds.Close()
			}
			return nil, err
		}
	}
	p.progress = newProgress(o.Progress, total, o.ProgressInterval)
	p.progress.cache = o.Cache
	type count struct {
		n   int
		err error
	}
	var counted chan count
	if p.inf != nil {
		counted = make(chan count, 1)
		go func() {
			n, err := CountRows(o.Data)
			p.progress.setTotal(n)
			counted <- count{n, err}
		}()
	}
	p.progress.start()

	g, gctx := errgroup.WithContext(ctx)
	// A sample holds one of conc slots while it waits on an endpoint. The
	// rules judge waits on none: a sample it scores gives its slot back as
	// soon as its prediction is written, so that the next request goes out
	// while the rules run, and takes one of conc judging places instead
	// (first, so that at most 2×conc samples are held at once).
	bound := &slots{inflight: make(chan struct{}, conc)}
	if p.inf != nil && p.jd != nil && p.jd.rules != nil {
		bound.judging = make(chan struct{}, conc)
	}
	src, rerr := readData(o.Data, o.SkipBad, conc, func(it *Item) error {
		if err := gctx.Err(); err != nil {
			return err
		}
		done := predDone[it.Sample]
		if p.jd != nil {
			done = judgedDone[it.Sample]
		}
		if done {
			p.resumed()
			return nil
		}
		pred := pending[it.Sample]
		delete(pending, it.Sample)
		if p.inf == nil && pred == nil {
			p.mu.Lock()
			p.sum.Unpredicted++
			p.mu.Unlock()
			return nil
		}
		select {
		case bound.inflight <- struct{}{}:
		case <-gctx.Done():
			return gctx.Err()
		}
		g.Go(func() error { return p.process(gctx, it, pred, bound) })
		return nil
	})
	werr := g.Wait()
	var nerr error
	if counted != nil {
		c := <-counted
		total, nerr = c.n, c.err
	}
	p.progress.stop()
	var cerr error
	if p.preds != nil {
		cerr = errors.Join(cerr, p.preds.Close())
	}
	if p.judged != nil {
		cerr = errors.Join(cerr, p.judged.Close())
	}
	p.sum.Source = src
	p.sum.Total = total
	p.sum.Truncated = int(p.truncated.Load())
	p.sum.GenericJudge = int(p.generic.Load())
	p.sum.CacheHits, p.sum.CacheMisses = o.Cache.Hits(), o.Cache.Misses()
	p.sum.CacheCorrupt, p.sum.CacheDir = o.Cache.Corrupt(), o.Cache.Dir()
	// A sample that stops the run cancels gctx, and the reader then stops
	// with gctx's context.Canceled: that is an effect of werr, not a cause,
	// and printed first it would hide the reason (a row's file:line).
	if werr != nil && ctx.Err() == nil && errors.Is(rerr, context.Canceled) {
		rerr = nil
	}
	if err := errors.Join(rerr, werr, cerr, nerr); err != nil {
		p.sum.Elapsed = time.Since(start)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return &p.sum, fmt.Errorf("bench run interrupted (finished samples are kept; rerun to resume): %w", ctxErr)
		}
		return &p.sum, err
	}
	if p.inf != nil {
		if err := compact(predPath); err != nil {
			return &p.sum, fmt.Errorf("finish %s: %w", predPath, err)
		}
		p.sum.PredictionsPath = predPath
	}
	if p.jd != nil {
		if err := compact(judgedPath); err != nil {
			return &p.sum, fmt.Errorf("finish %s: %w", judgedPath, err)
		}
		p.sum.JudgedPath = judgedPath
		rep, err := ScoreFile(judgedPath, filepath.Join(o.Out, ScoresFile), &ScoreOptions{Strict: o.Strict})
		if err != nil {
			return &p.sum, err
		}
		p.sum.Report = rep
	}
	p.sum.Elapsed = time.Since(start)
	return &p.sum, nil
}

// ScoreFile scores a judged file and, when out is not empty, writes the
// report's JSON there atomically.
func ScoreFile(judgedPath, out string, opts *ScoreOptions) (*Report, error) {
	rows, err := ReadJudged(judgedPath)
	if err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	rep := Score(rows, opts)
	rep.attachPromptFiles(filepath.Dir(judgedPath))
	if out != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := writeFileAtomic(out, append(b, '\n')); err != nil {
			return nil, fmt.Errorf("write %s: %w", out, err)
		}
	}
	return rep, nil
}

func (p *pipeline) resumed() {
	p.mu.Lock()
	p.sum.Resumed++
	p.sum.Done++
	p.mu.Unlock()
	p.progress.add(1, false, true)
}

// slots bound the samples of a run: inflight those waiting on an endpoint
// (taken before a sample starts); judging, when set, those the rules judge
// scores after they left inflight.
type slots struct {
	inflight, judging chan struct{}
}

// process carries one sample through the stages; it holds one of
// s.inflight, taken for it, until it no longer waits on an endpoint.
func (p *pipeline) process(ctx context.Context, it *Item, pred *Prediction, s *slots) error {
	held := true
	leave := func() {
		if held {
			held = false
			<-s.inflight
		}
	}
	defer leave()
	var (
		failure, msg string
		err          error
	)
	if p.o.Remote != nil {
		failure, msg, err = p.remote(ctx, it, pred)
	} else {
		failure, msg, err = p.local(ctx, it, pred, s, leave)
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.sum.Done++
	if failure != "" {
		p.sum.Failed[failure]++
		if len(p.sum.Errors) < 20 {
			p.sum.Errors = append(p.sum.Errors, msg)
		}
	}
	p.mu.Unlock()
	if failure != "" {
		p.log.Debug("sample failed", "sample", it.Sample, "file", it.File, "line", it.Line, "reason", failure, "error", msg)
	}
	p.progress.add(1, failure != "", false)
	if failure == FailTransport {
		if n := p.consecutive.Add(1); p.maxConsecutive > 0 && n >= p.maxConsecutive {
			return fmt.Errorf("%w: %d samples in a row failed (last: %s); finished samples are kept, rerun to resume once it is back", ErrBackendDown, n, msg)
		}
	} else {
		p.consecutive.Store(0)
	}
	return nil
}

// local does a sample's stages in this process and appends its rows;
// leave gives back its endpoint slot once the rules judge takes over.
func (p *pipeline) local(ctx context.Context, it *Item, pred *Prediction, s *slots, leave func()) (failure, msg string, err error) {
	if pred == nil {
		pr, err := p.inf.infer(ctx, it)
		if err != nil {
			return "", "", err
		}
		if pr.Truncated {
			p.truncated.Add(1)
		}
		if err := p.preds.Append(pr); err != nil {
			return "", "", err
		}
		pred = &pr
	}
	failure, msg = pred.Failure, pred.Error
	if p.jd != nil {
		if s.judging != nil {
			select {
			case s.judging <- struct{}{}:
			case <-ctx.Done():
				return "", "", ctx.Err()
			}
			defer func() { <-s.judging }()
			leave()
		}
		j, err := p.jd.judge(ctx, it.Record, *pred)
		if err != nil {
			return "", "", err
		}
		if j.GenericJudge {
			p.generic.Add(1)
		}
		if err := p.judged.Append(j); err != nil {
			return "", "", err
		}
		failure, msg = j.Failure, j.Error
	}
	return failure, msg, nil
}
