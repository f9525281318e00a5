package cli

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// TestTwoNodeCluster: two nodes whose routes name both (each its own too,
// as the docs ask) come up with serve's default replicas, and a session
// begun on either is stepped through the other and back. Counting route
// entries asked them for three replicas, which two servers never place:
// neither answered /health, and each gave up after a minute.
func TestTwoNodeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a two-node cluster")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	turnOf := regexp.MustCompile(`echo s(\d+) t(\d+)`)
	fake := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		m := turnOf.FindAllStringSubmatch(r.Messages[len(r.Messages)-1].Content, -1)
		if len(m) == 0 {
			return fakellm.Reply{Status: 400}
		}
		return fakellm.Reply{Content: fmt.Sprintf("out s%s t%s\n", m[len(m)-1][1], m[len(m)-1][2])}
	})
	t.Cleanup(fake.Close)

	// forming the cluster takes seconds (5 on an idle two-core machine)
	up, upDone := context.WithTimeout(ctx, 45*time.Second)
	defer upDone()
	start := time.Now()
	nodes := startEmbedded(up, t, 2, time.Second, func(int) ([]string, []string) { return []string{"--model", fake.URL}, nil })
	t.Logf("two nodes healthy after %v", time.Since(start).Round(time.Millisecond))

	h := &http.Client{Timeout: 30 * time.Second}
	for begun := range nodes {
		id := fmt.Sprintf("two-%d", begun)
		if _, err := anyNodeDo(ctx, h, nodes[begun], "POST", "/reset", map[string]any{"episode_id": id, "world_id": "python-terminal"}); err != nil {
			t.Fatal(err)
		}
		if err := openEnvStep(ctx, h, nodes[1-begun], id, begun, 1); err != nil {
			t.Fatal(err)
		}
		if err := openEnvStep(ctx, h, nodes[begun], id, begun, 2); err != nil {
			t.Fatal(err)
		}
	}
}
