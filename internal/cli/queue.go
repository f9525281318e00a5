package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentworld/agentworld/internal/natsconn"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// queueFlags are a coordinator's work-queue flags (rollout, data sample).
type queueFlags struct {
	url     string
	ackWait time.Duration
	nc      *nats.Conn
}

func (q *queueFlags) register(cmd *cobra.Command, what string) {
	fl := cmd.Flags()
	fl.StringVar(&q.url, "queue", "", "NATS server(s) with JetStream (nats://HOST:4222[,nats://…]): put the "+what+"s in a work queue there for worker processes instead of doing them here; the run's files are written here as always, and a rerun of the same command resumes the same job")
	fl.DurationVar(&q.ackWait, "ack-wait", workqueue.DefaultAckWait, "with --queue: how long an "+what+" may go without word from its worker (they report every third of it) before another worker gets it (fixed when the job is first opened)")
}

// jobSpec is the spec of a job a CLI command hands to its workers: the
// command's flags, as given on the coordinator's command line.
type jobSpec struct {
	Flags []string `json:"flags"`
}

// open connects to the queue and opens a job of kind whose workers take
// args (jobFlags) for the coordinator's flags. Its id follows from kind
// and pin, so the same command restarted after a kill opens the same job
// again.
func (q *queueFlags) open(cmd *cobra.Command, kind string, args []string, pin ...[]byte) (*workqueue.Coordinator, error) {
	spec, err := json.Marshal(jobSpec{Flags: args})
	if err != nil {
		return nil, err
	}
	nc, err := natsconn.Dial(q.url, "agentworld "+kind)
	if err != nil {
		return nil, flagErr("queue", err)
	}
	job := workqueue.Job{ID: workqueue.JobID(kind, append(pin, spec)...), Kind: kind, Spec: spec}
	c, err := workqueue.Open(cmd.Context(), nc, job, &workqueue.Options{AckWait: q.ackWait, Logger: logger(cmd)})
	if err != nil {
		nc.Close()
		return nil, flagErr("queue", err)
	}
	q.nc = nc
	logger(cmd).Info("work queue job open; start workers", "job", job.ID, "queue", q.url)
	return c, nil
}

// close closes the coordinator and its connection. ran is whether the
// run got as far as its result (rollout.Run and rejection.Run return one
// with their error once they have read the output directory). A run
// with a result that was not interrupted removes its job (Finish), even
// when it failed: what workers finished is in the output directory, a
// failed item's stored failure goes with the job so a rerun tries it
// again, and the rerun does again what was still queued or not yet
// taken into the output directory. An interrupted run, or one that
// failed before it had a result (on --out itself: not creatable, other
// settings, locked), keeps its job for a rerun to resume, unless it
// never queued an item (abandonJob).
func (q *queueFlags) close(cmd *cobra.Command, c *workqueue.Coordinator, ran bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), time.Minute)
	defer cancel()
	var err error
	if ran && cmd.Context().Err() == nil {
		err = c.Finish(ctx)
	} else {
		err = abandonJob(ctx, cmd, c)
	}
	q.nc.Close()
	return err
}

// abandonJob closes the coordinator of a run that failed or was stopped,
// removing its job when no item of it was ever queued: a coordinator
// that failed on its input (a missing file) would otherwise leave a job
// that workers serve for ever and no rerun opens again (the corrected
// command pins another job id).
func abandonJob(ctx context.Context, cmd *cobra.Command, c *workqueue.Coordinator) error {
	removed, err := c.Abandon(ctx)
	if removed {
		logger(cmd).Info("work queue job removed: the run stopped before it queued anything", "job", c.Job().ID)
	}
	return err
}

// jobFlagsAlwaysSkipped are flags no worker takes from its coordinator:
// the log level is the worker's own.
var jobFlagsAlwaysSkipped = []string{"help", "log-level"}

// jobFlags lists the flags set on cmd's command line as arguments that
// set them again on a worker's copy of the command (jobCommand), but for
// skip and the secrets: flags named *api-key, returned apart, which
// workers read from their own environment instead.
func jobFlags(cmd *cobra.Command, skip ...string) (args, secrets []string) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch {
		case slices.Contains(skip, f.Name) || slices.Contains(jobFlagsAlwaysSkipped, f.Name):
		case strings.HasSuffix(f.Name, "api-key"):
			secrets = append(secrets, "--"+f.Name)
		default:
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				for _, v := range sv.GetSlice() {
					args = append(args, "--"+f.Name+"="+v)
				}
				return
			}
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	return args, secrets
}

// jobCommand is a worker's copy of the coordinator's command for job:
// a command with the flags register adds, set from the job's spec, run
// in ctx (the job's) and writing where parent writes.
func jobCommand(ctx context.Context, parent *cobra.Command, job workqueue.Job, register func(*cobra.Command)) (*cobra.Command, error) {
	var spec jobSpec
	if err := json.Unmarshal(job.Spec, &spec); err != nil {
		return nil, fmt.Errorf("job %s: spec: %w", job.ID, err)
	}
	cmd := &cobra.Command{Use: job.Kind}
	register(cmd)
	cmd.SetContext(ctx)
	cmd.SetOut(parent.OutOrStdout())
	cmd.SetErr(parent.ErrOrStderr())
	if err := cmd.Flags().Parse(spec.Flags); err != nil {
		return nil, fmt.Errorf("job %s: its coordinator's flags: %w", job.ID, err)
	}
	return cmd, nil
}

// workerFlags are a queue worker's flags.
type workerFlags struct {
	url         string
	name        string
	concurrency int
}

func (w *workerFlags) register(cmd *cobra.Command, what string) {
	fl := cmd.Flags()
	fl.StringVar(&w.url, "queue", "", "the NATS server(s) of the work queue (nats://HOST:4222, comma-separated); required")
	fl.StringVar(&w.name, "name", "", "this worker's name in results and logs (default: host name and process id)")
	fl.IntVar(&w.concurrency, "concurrency", workqueue.DefaultConcurrency, what+" worked on at once")
}

// work serves every job of kind on the queue until the command is
// interrupted, which is its normal end.
func (w *workerFlags) work(cmd *cobra.Command, kind string, start workqueue.Start) error {
	if w.url == "" {
		return flagErr("queue", errors.New("required"))
	}
	nc, err := natsconn.Dial(w.url, "agentworld "+kind+" worker")
	if err != nil {
		return flagErr("queue", err)
	}
	defer nc.Close()
	err = workqueue.Work(cmd.Context(), nc, kind, start, &workqueue.WorkerOptions{Name: w.name, Concurrency: w.concurrency, Logger: logger(cmd)})
	if errors.Is(err, context.Canceled) && cmd.Context().Err() != nil {
		return nil
	}
	return err
}
