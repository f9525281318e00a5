package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentworld/agentworld/internal/trajectory"
)

// Remote does samples in other processes (bench run --queue): with
// Options.Remote set, Run reads the data, resumes, journals, shows
// progress and writes the run's files as always, but hands each sample
// it would process to Remote instead of calling the model and the judge
// here. Options.Model and JudgeModel (or Rules) must still be set: they
// say which stages run and are recorded in run.json, and are not called.
type Remote interface {
	// Do runs one sample's remaining stages and returns its rows; an
	// error stops the run as a local sample's error would.
	Do(ctx context.Context, s *Sample) (SampleResult, error)
}

// Sample is one sample as another process receives it: the data row
// (with its identity) and, when it was predicted by an earlier run but
// not judged, its prediction.
type Sample struct {
	Sample string `json:"sample"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	// Record is the data row as read (nil when Err is set).
	Record *trajectory.Record `json:"record,omitempty"`
	// Err says why the row cannot be evaluated ([Item.Err]).
	Err string `json:"error,omitempty"`
	// Prediction, when set, is judged instead of predicted again.
	Prediction *Prediction `json:"prediction,omitempty"`
}

// SampleResult is what a sample's stages produced: the prediction row
// (when the sample was predicted) and the judged row (when judged).
type SampleResult struct {
	Prediction *Prediction `json:"prediction,omitempty"`
	Judged     *Judged     `json:"judged,omitempty"`
}

// Retryable reports a result a later run should compute again (an
// endpoint failed), as resume treats such rows.
func (r SampleResult) Retryable() bool {
	return (r.Prediction != nil && r.Prediction.Failure == FailTransport) ||
		(r.Judged != nil && r.Judged.Failure == FailTransport)
}

// item is the pipeline's item of a received sample.
func (s *Sample) item() *Item {
	it := &Item{Sample: s.Sample, File: s.File, Line: s.Line, Record: s.Record}
	if s.Err != "" {
		it.Err = errors.New(s.Err)
	}
	return it
}

func newSample(it *Item, pred *Prediction) *Sample {
	s := &Sample{Sample: it.Sample, File: it.File, Line: it.Line, Record: it.Record, Prediction: pred}
	if it.Err != nil {
		s.Err = it.Err.Error()
	}
	return s
}

// SampleRunner does one sample's stages as a run with the same options
// would, without a run directory: the worker side of [Remote].
type SampleRunner struct {
	inf *inferer
	jd  *judger
}

// NewSampleRunner prepares the stages of o (Model, the judge, their
// settings, Template, Cache). Data, Out, Remote and the reference mode
// are not used and refused.
func NewSampleRunner(o *Options) (*SampleRunner, error) {
	if o.JudgeMode == ModeReference {
		return nil, errors.New("bench: the reference judge mode cannot run on workers (the reference predictions are a file of the coordinator)")
	}
	inf, jd, err := stages(o)
	if err != nil {
		return nil, err
	}
	return &SampleRunner{inf: inf, jd: jd}, nil
}

// Run does the sample's stages: the prediction unless the sample carries
// one, then the judgement when a judge is set. Model and judge failures
// are failed rows; an error means the sample could not be done here
// (cancellation, a row the template cannot render).
func (r *SampleRunner) Run(ctx context.Context, s *Sample) (SampleResult, error) {
	var res SampleResult
	it := s.item()
	pred := s.Prediction
	if pred == nil {
		if r.inf == nil {
			return res, fmt.Errorf("bench: sample %s has no prediction and no model is set", s.Sample)
		}
		pr, err := r.inf.infer(ctx, it)
		if err != nil {
			return res, err
		}
		pred, res.Prediction = &pr, &pr
	}
	if r.jd != nil {
		j, err := r.jd.judge(ctx, it.Record, *pred)
		if err != nil {
			return res, err
		}
		res.Judged = &j
	}
	return res, nil
}

// stages builds the inference and judging stages of o; either may be
// nil (not run).
func stages(o *Options) (*inferer, *judger, error) {
	var inf *inferer
	if o.Model != nil {
		inf = &inferer{model: o.Model, name: o.ModelName, settings: o.Infer, cache: o.Cache, tmpl: o.Template, data: o.Data}
	}
	if o.Rules == nil && o.Rubric == nil {
		return inf, nil, nil
	}
	jd := &judger{name: o.JudgeName, model: o.JudgeModel, rubric: o.Rubric, rules: o.Rules, settings: o.Judge, cache: o.Cache,
		attempts: o.JudgeAttempts, retryWait: o.JudgeRetryWait}
	if o.Rules != nil {
		jd.name, jd.model, jd.rubric = RulesJudgeName, nil, nil
	} else {
		jd.prompts = o.judgeText().Label
	}
	if o.Rules == nil && o.JudgeModel == nil {
		return nil, nil, errors.New("bench: a rubric judge needs a judge model")
	}
	if jd.attempts <= 0 {
		jd.attempts = DefaultJudgeAttempts
	}
	if jd.retryWait <= 0 {
		jd.retryWait = 2 * time.Second
	}
	if err := jd.setMode(o); err != nil {
		return nil, nil, err
	}
	return inf, jd, nil
}

// remote does a sample through o.Remote and appends its rows as process
// does for a local one.
func (p *pipeline) remote(ctx context.Context, it *Item, pred *Prediction) (failure, msg string, err error) {
	res, err := p.o.Remote.Do(ctx, newSample(it, pred))
	if err != nil {
		return "", "", err
	}
	if pred == nil && p.inf != nil {
		if res.Prediction == nil {
			return "", "", fmt.Errorf("bench: sample %s (%s:%d): the worker's result has no prediction", it.Sample, it.File, it.Line)
		}
		pred = res.Prediction
		if pred.Truncated {
			p.truncated.Add(1)
		}
		if err := p.preds.Append(*pred); err != nil {
			return "", "", err
		}
	}
	if pred == nil {
		return "", "", fmt.Errorf("bench: sample %s (%s:%d): no prediction", it.Sample, it.File, it.Line)
	}
	failure, msg = pred.Failure, pred.Error
	if p.jd != nil {
		j := res.Judged
		if j == nil {
			return "", "", fmt.Errorf("bench: sample %s (%s:%d): the worker's result has no judgement", it.Sample, it.File, it.Line)
		}
		if j.GenericJudge {
			p.generic.Add(1)
		}
		if err := p.judged.Append(*j); err != nil {
			return "", "", err
		}
		failure, msg = j.Failure, j.Error
	}
	return failure, msg, nil
}

// MarshalSample and UnmarshalSample are a sample's wire form.
func MarshalSample(s *Sample) ([]byte, error) { return json.Marshal(s) }

// UnmarshalSample reads a sample's wire form.
func UnmarshalSample(b []byte) (*Sample, error) {
	var s Sample
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("bench: sample: %w", err)
	}
	if s.Sample == "" {
		return nil, errors.New("bench: sample without its key")
	}
	return &s, nil
}
