package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/workqueue"
)

// TestJobFlagsRoundTrip: the flags a coordinator hands its workers are
// those given on its command line but for its own and the secrets, and a
// worker's copy of the command parses them back to the same values,
// repeated flags included.
func TestJobFlagsRoundTrip(t *testing.T) {
	t.Setenv(envconfig.PolicyAPIKey.Name, "")
	var got []string
	var secrets []string
	cmd := newRolloutCmd()
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		got, secrets = jobFlags(cmd, rolloutCoordinatorFlags...)
		return nil
	}
	cmd.SetArgs([]string{"--tasks", "t.jsonl", "--out", "o", "--policy-url", "http://p/v1", "--policy-model", "m",
		"--policy-api-key", "sk-secret", "--sim-api-key", "sk-2", "--replica", "http://a/v1", "--replica", "http://b,c/v1",
		"--policy-temperature", "0.7", "--group-size", "3", "--concurrency", "64", "--queue", "nats://q:4222", "--ack-wait", "5s",
		"--step-timeout", "90s", "--replay-strict"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, f := range got {
		for _, bad := range []string{"sk-", "--tasks", "--out", "--concurrency", "--queue", "--ack-wait"} {
			if strings.Contains(f, bad) {
				t.Errorf("job flag %q: the coordinator's own or a secret", f)
			}
		}
	}
	if diff := cmp.Diff([]string{"--policy-api-key", "--sim-api-key"}, secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	spec, _ := json.Marshal(jobSpec{Flags: got})
	var r rolloutFlags
	w, err := jobCommand(context.Background(), cmd, workqueue.Job{ID: "j", Kind: "rollout", Spec: spec}, r.register)
	if err != nil {
		t.Fatal(err)
	}
	o, err := r.options(w)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"http://a/v1", "http://b,c/v1"}, r.f.cfg.Replicas); diff != "" {
		t.Errorf("replicas (-want +got):\n%s", diff)
	}
	if o.Policy.URL != "http://p/v1" || o.Policy.APIKey != "" || *o.Policy.Temperature != 0.7 || o.GroupSize != 3 ||
		r.stepTimeout.String() != "1m30s" || !r.f.cfg.ReplayStrict || r.tasksPath != "" || r.out != "" {
		t.Errorf("worker's settings: policy %+v group %d step timeout %s strict %v tasks %q out %q",
			*o.Policy, o.GroupSize, r.stepTimeout, r.f.cfg.ReplayStrict, r.tasksPath, r.out)
	}
}
