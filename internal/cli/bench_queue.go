package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/natsconn"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// benchJobKind is the kind of bench run --queue jobs, which bench worker
// serves.
const benchJobKind = "bench"

// maxShippedBytes bounds the files a bench job carries to its workers
// (the judge text of --prompts, the template library of --template-dir).
const maxShippedBytes = 16 << 20

// benchRunFlags are bench run's flags.
type benchRunFlags struct {
	rf runFlags
	tf transportFlags
	gf genFlags
	jf judgeFlags
	// queue is the NATS URL of --queue; ackWait its --ack-wait.
	queue   string
	ackWait time.Duration
}

func (f *benchRunFlags) register(cmd *cobra.Command) {
	f.rf.register(cmd)
	f.tf.registerAs(cmd, "model-", "api-key", "", "model under test", envconfig.ModelAPIKey, envconfig.OpenAIAPIKey)
	cmd.Flags().StringVar(&f.tf.model, "model", "", "model name of the world model under test")
	f.gf.register(cmd, "", bench.DefaultMaxTokens, bench.DefaultTemperature, "model under test")
	f.jf.register(cmd)
	f.jf.registerModes(cmd)
	cmd.Flags().StringVar(&f.queue, "queue", "", "NATS server(s) with JetStream (nats://HOST:4222[,nats://…]): put the samples in a work queue there for bench worker processes instead of doing them here; the run's files are written here as always, and a rerun of the same command resumes the same job")
	cmd.Flags().DurationVar(&f.ackWait, "ack-wait", workqueue.DefaultAckWait, "with --queue: how long a sample may go without word from its worker (they report every third of it) before another worker gets it")
}

// options checks the flags and turns them into pipeline options.
func (f *benchRunFlags) options(cmd *cobra.Command) (*bench.Options, error) {
	o, err := inferOptions(cmd, &f.rf, &f.tf, &f.gf)
	if err != nil {
		return nil, err
	}
	if err := f.jf.apply(cmd, o); err != nil {
		return nil, err
	}
	return o, nil
}

// queueLocalFlags are bench run's flags that stay with the coordinator:
// where data and results are, samples in flight, resume choices, the
// queue itself and the API keys (secrets never go into NATS: workers
// read theirs from their own environment). Every other flag given is
// sent to the workers as it was given.
var queueLocalFlags = map[string]bool{
	"queue": true, "ack-wait": true, "data": true, "out": true, "cache": true, "no-cache": true,
	"concurrency": true, "skip-bad": true, "retry-failed": true, "strict": true, "otel-endpoint": true,
	"api-key": true, "judge-api-key": true,
	// Directories: their files travel in the job (benchJobSpec.Files).
	"prompts": true, "template-dir": true,
}

// benchJobSpec is what a bench worker needs of a job: the flags that
// decide each sample's result, and the files of the directories they
// name, by flag and slash-separated path.
type benchJobSpec struct {
	Args  []string                     `json:"args"`
	Files map[string]map[string]string `json:"files,omitempty"`
}

// jobSpec collects the worker's part of this run's flags.
func (f *benchRunFlags) jobSpec(cmd *cobra.Command) (*benchJobSpec, error) {
	spec := &benchJobSpec{Files: map[string]map[string]string{}}
	cmd.LocalFlags().VisitAll(func(fl *pflag.Flag) {
		if fl.Changed && !queueLocalFlags[fl.Name] {
			spec.Args = append(spec.Args, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	total := 0
	add := func(flag, dir, rel string) error {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return fmt.Errorf("--%s: %w", flag, err)
		}
		if total += len(b); total > maxShippedBytes {
			return fmt.Errorf("--%s: the files to send to the workers exceed %d MiB", flag, maxShippedBytes>>20)
		}
		if spec.Files[flag] == nil {
			spec.Files[flag] = map[string]string{}
		}
		spec.Files[flag][rel] = string(b)
		return nil
	}
	if dir := f.jf.prompts; dir != "" {
		p, err := judge.LoadPrompts(dir)
		if err != nil {
			return nil, fmt.Errorf("--prompts: %w", err)
		}
		for _, fh := range p.Files() {
			if err := add("prompts", dir, fh.Path); err != nil {
				return nil, err
			}
		}
	}
	if dir := f.rf.tmpl.dir; dir != "" {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			return add("template-dir", dir, filepath.ToSlash(rel))
		})
		if err != nil {
			return nil, fmt.Errorf("--template-dir: %w", err)
		}
	}
	return spec, nil
}

// runQueued is bench run --queue: the pipeline runs here, each sample on
// a worker.
func (f *benchRunFlags) runQueued(cmd *cobra.Command, o *bench.Options) error {
	switch {
	case f.jf.reference != "":
		return errors.New("--reference cannot be used with --queue: the workers do not have the reference predictions (run the reference mode without --queue)")
	case f.rf.otelEndpoint != "":
		return errors.New("--otel-endpoint cannot be used with --queue: the model and judge calls are made by the workers")
	case f.rf.cacheDir != "":
		return errors.New("--cache cannot be used with --queue: the response cache is the workers' (bench worker --cache)")
	}
	spec, err := f.jobSpec(cmd)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	out, data := o.Out, o.Data
	if a, err := filepath.Abs(out); err == nil {
		out = a
	}
	if a, err := filepath.Abs(data); err == nil {
		data = a
	}
	job := workqueue.Job{ID: workqueue.JobID(benchJobKind, raw, []byte(out), []byte(data)), Kind: benchJobKind, Spec: raw}
	nc, err := natsconn.Dial(f.queue, "agentworld bench run")
	if err != nil {
		return fmt.Errorf("--queue: %w", err)
	}
	defer nc.Close()
	log := logger(cmd)
	c, err := workqueue.Open(cmd.Context(), nc, job, &workqueue.Options{AckWait: f.ackWait, Logger: log})
	if err != nil {
		return fmt.Errorf("--queue %s: %w", f.queue, err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "queue: job %s on %s; samples are done by `agentworld bench worker --queue %s`\n", job.ID, f.queue, f.queue)
	o.Remote = &queueRemote{c: c}
	sum, runErr := bench.Run(cmd.Context(), o)
	if runErr == nil {
		// Every result is in the run's files now; the job can go.
		if err := c.Finish(context.WithoutCancel(cmd.Context())); err != nil {
			log.Warn("the finished job could not be removed from NATS", "job", job.ID, "error", err)
		}
	} else {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), time.Minute)
		if err := abandonJob(ctx, cmd, c); err != nil {
			log.Warn("closing the job", "job", job.ID, "error", err)
		}
		cancel()
	}
	return finish(cmd, sum, runErr)
}

// queueRemote does samples through a work queue.
type queueRemote struct{ c *workqueue.Coordinator }

func (q *queueRemote) Do(ctx context.Context, s *bench.Sample) (bench.SampleResult, error) {
	var res bench.SampleResult
	payload, err := bench.MarshalSample(s)
	if err != nil {
		return res, err
	}
	r, err := q.c.Do(ctx, workqueue.Item{ID: s.Sample, Payload: payload})
	if errors.Is(err, workqueue.ErrItemFailed) {
		// Not kept: a rerun tries the sample again.
		_ = q.c.Forget(context.WithoutCancel(ctx), s.Sample)
		return res, fmt.Errorf("sample %s (%s:%d): %w", s.Sample, s.File, s.Line, err)
	}
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(r.Payload, &res); err != nil {
		return res, fmt.Errorf("sample %s (%s:%d): the result from worker %s: %w", s.Sample, s.File, s.Line, r.Worker, err)
	}
	if res.Retryable() {
		// An endpoint failure is journaled as failed and retried by a
		// rerun, as a local run's: its stored result must not answer then.
		if err := q.c.Forget(ctx, s.Sample); err != nil {
			return res, err
		}
	}
	return res, nil
}

func newBenchWorkerCmd() *cobra.Command {
	var (
		queue, name, cacheDir string
		concurrency           int
	)
	cmd := &cobra.Command{
		Use:   "worker --queue nats://HOST:4222 [--concurrency N] [--cache DIR]",
		Short: "Do the samples of bench run --queue jobs until stopped",
		Long: `Serve every bench run --queue job on the NATS server(s): pull a sample,
call the world model and the judge as bench run would (the job carries its
settings, URLs, judge text and templates), store the result and take the
next, until interrupted. API keys never travel with a job: each worker
reads its own from the environment (AGENTWORLD_MODEL_API_KEY or
OPENAI_API_KEY, AGENTWORLD_JUDGE_API_KEY). A worker that dies leaves its
samples to the others after the job's --ack-wait; a sample is never
stored twice.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if queue == "" {
				return errors.New("missing required flag: --queue")
			}
			log := logger(cmd)
			var cache *answercache.Cache
			if cacheDir != "" {
				c, err := answercache.OpenCache(cacheDir, &answercache.CacheOptions{Logger: log})
				if err != nil {
					return err
				}
				defer func() { _ = c.Close() }()
				cache = c
			}
			files, err := os.MkdirTemp("", "agentworld-worker-")
			if err != nil {
				return err
			}
			defer func() { _ = os.RemoveAll(files) }()
			nc, err := natsconn.Dial(queue, "agentworld bench worker")
			if err != nil {
				return fmt.Errorf("--queue: %w", err)
			}
			defer nc.Close()
			start := func(_ context.Context, job workqueue.Job) (workqueue.Process, error) {
				return startBenchJob(cmd, job, filepath.Join(files, job.ID), cache)
			}
			err = workqueue.Work(cmd.Context(), nc, benchJobKind, start, &workqueue.WorkerOptions{Name: name, Concurrency: concurrency, Logger: log})
			if errors.Is(err, context.Canceled) {
				return nil // interrupted: the samples in hand went back to the queue
			}
			return err
		},
	}
	usesEnv(cmd, envconfig.ModelAPIKey, envconfig.OpenAIAPIKey, envconfig.JudgeAPIKey)
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "NATS server(s) with JetStream the coordinators use (nats://HOST:4222[,nats://…])")
	f.IntVar(&concurrency, "concurrency", workqueue.DefaultConcurrency, "samples this worker does at once")
	f.StringVar(&name, "name", "", "this worker's name in the results it stores and the log (default: host name and process id)")
	f.StringVar(&cacheDir, "cache", "", "response cache directory of this worker (default: none)")
	return cmd
}

// startBenchJob prepares a worker for one bench job: the job's flags are
// parsed as bench run parses them, the files it carries written under
// dir, and the stages built once.
func startBenchJob(cmd *cobra.Command, job workqueue.Job, dir string, cache *answercache.Cache) (workqueue.Process, error) {
	var spec benchJobSpec
	if err := json.Unmarshal(job.Spec, &spec); err != nil {
		return nil, fmt.Errorf("job %s: its description: %w", job.ID, err)
	}
	args := append([]string(nil), spec.Args...)
	for flag, files := range spec.Files {
		if flag != "prompts" && flag != "template-dir" {
			return nil, fmt.Errorf("job %s: files for an unknown flag --%s (a newer coordinator?)", job.ID, flag)
		}
		root := filepath.Join(dir, flag)
		for rel, content := range files {
			p := filepath.Join(root, filepath.FromSlash(rel))
			if !strings.HasPrefix(p, root+string(filepath.Separator)) {
				return nil, fmt.Errorf("job %s: file %q of --%s leaves its directory", job.ID, rel, flag)
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				return nil, err
			}
		}
		args = append(args, "--"+flag+"="+root)
	}
	var f benchRunFlags
	run := &cobra.Command{Use: "run"}
	f.register(run)
	run.SetContext(cmd.Context())
	run.SetErr(cmd.ErrOrStderr())
	if err := run.ParseFlags(args); err != nil {
		return nil, fmt.Errorf("job %s: its flags %q: %w (a coordinator of another version?)", job.ID, args, err)
	}
	// Where the data and results are is the coordinator's business.
	f.rf.data, f.rf.out = "(queue job "+job.ID+")", "(queue job "+job.ID+")"
	o, err := f.options(run)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", job.ID, err)
	}
	o.Cache = cache
	runner, err := bench.NewSampleRunner(o)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", job.ID, err)
	}
	return func(ctx context.Context, it workqueue.Item) ([]byte, error) {
		s, err := bench.UnmarshalSample(it.Payload)
		if err != nil {
			return nil, err
		}
		res, err := runner.Run(ctx, s)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	}, nil
}
