package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentworld/agentworld/internal/rollout"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// smallMaxPayload is the max_payload of the NATS server of the
// large-value queue tests: rows several times larger stay small.
const smallMaxPayload = 16 << 10

// longAnswer is a final answer of about n bytes that depends on seed.
func longAnswer(seed string, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		sum := sha256.Sum256([]byte(seed + string(rune(i))))
		b.WriteString(hex.EncodeToString(sum[:]))
		b.WriteByte(' ')
	}
	return b.String()
}

// TestRolloutQueueLargeRows: on a NATS server whose messages hold
// 16 KiB, a queued rollout whose episodes end with final answers of
// five times that (rows travel through the job's object store) writes
// the rows and summary of a single-process run, byte for byte apart from
// session ids, and removes the job's objects when it is done.
func TestRolloutQueueLargeRows(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	url := natstest.StartWith(t, &natstest.Options{MaxPayload: smallMaxPayload})
	pol := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		rep := textPolicyReply(r)
		if rep.Content == "WS-31 duplicates WS-29." {
			// The task's own instruction makes each answer differ.
			rep.Content += " " + longAnswer(r.Messages[1].Content, 5*smallMaxPayload)
		}
		return rep
	})
	t.Cleanup(pol.Close)
	q := &rolloutQueue{tasks: queueTasks(t, 6), url: url, ref: t.TempDir(), pol: pol}
	if _, err := runInProcess(append(q.args(q.ref, false), "--policy-api-key", "ref")...); err != nil {
		t.Fatal(err)
	}
	rows, err := os.ReadFile(filepath.Join(q.ref, rollout.EpisodesFile))
	if err != nil {
		t.Fatal(err)
	}
	large := 0
	for _, line := range bytes.Split(rows, []byte("\n")) {
		if len(line) > 4*smallMaxPayload {
			large++
		}
	}
	if large != 12 { // 3 issue-tracker tasks × group 4
		t.Fatalf("%d rows over 4× max_payload, want 12", large)
	}

	startRolloutWorker(t, url, "w1")
	out := t.TempDir()
	if stderr, err := runInProcess(append(q.args(out, true), "--policy-api-key", "coordinator")...); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	sameRollout(t, q.ref, out)

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var left []string
	for name := range js.ObjectStoreNames(t.Context()).Name() {
		left = append(left, name)
	}
	if len(left) != 0 {
		t.Errorf("object stores left after the run: %q", left)
	}
}
