package cli

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/envconfig"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/testkit/natstest"
)

// Sizes of TestExternalNATSCluster: sessions, each stepped through
// clusterTurns turns (two before the kill, two after), with a lease of
// extClusterLease.
const (
	extClusterSessions = 12
	extClusterLease    = time.Second
)

// TestExternalNATSCluster runs the Kubernetes deployment's mode: a
// three-server NATS JetStream cluster (in this process), and three serve
// processes joining it with `--cluster nats://…` (replicated on the three
// servers, as deploy/kubernetes does), each sending the model its own API
// key. Sessions created on node 0 are stepped through nodes 1 and 2: each
// step is forwarded to node 0 (every model request carries node 0's key).
// Then node 0 is killed with SIGKILL while idle, the NATS servers staying
// up, so only ownership moves: every session takes its next turns on
// nodes 1 and 2 within the lease plus 5 s of the kill, each turn's model
// request extends the previous turn's byte for byte (the new owner loaded
// the recorded turns), no turn is asked twice, and every transcript holds
// every turn once.
func TestExternalNATSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS cluster and three serve processes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	turnOf := regexp.MustCompile(`echo s(\d+) t(\d+)`)
	type key struct{ s, turn int }
	var mu sync.Mutex
	asked := map[key][]*fakellm.Request{}
	fake := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		m := turnOf.FindAllStringSubmatch(r.Messages[len(r.Messages)-1].Content, -1)
		if len(m) == 0 {
			return fakellm.Reply{Status: 400}
		}
		s, _ := strconv.Atoi(m[len(m)-1][1])
		turn, _ := strconv.Atoi(m[len(m)-1][2])
		mu.Lock()
		asked[key{s, turn}] = append(asked[key{s, turn}], r)
		mu.Unlock()
		return fakellm.Reply{Content: fmt.Sprintf("out s%d t%d\n", s, turn), PromptTokens: 10, CompletionTokens: 3}
	})
	t.Cleanup(fake.Close)

	start := time.Now()
	nats := strings.Join(natstest.StartCluster(t, 3, nil), ",")
	nodes := startNodes(ctx, t, natstest.FreePorts(t, 3), extClusterLease, func(int, string) []string {
		return []string{"--cluster", nats, "--nats-replicas", "3"}
	}, func(i int) ([]string, []string) {
		return []string{"--model", fake.URL}, []string{envconfig.ModelAPIKey.Name + "=" + clusterNodeKey(i)}
	})
	t.Logf("NATS cluster and three nodes healthy after %v", time.Since(start).Round(time.Millisecond))
	// on(i) talks to node i alone; after the kill, the live nodes.
	h := &http.Client{Timeout: 30 * time.Second}
	on := func(i int) *clusterClient { return &clusterClient{nodes: nodes[i : i+1], http: h} }
	live := &clusterClient{nodes: nodes, http: h}
	live.dead.Store(1) // node 0, once killed

	ids := make([]string, extClusterSessions)
	if err := live.parallel(ctx, extClusterSessions, func(s int) error {
		id, _, err := on(0).create(ctx)
		if err != nil {
			return err
		}
		ids[s] = id
		for turn := 1; turn <= 2; turn++ {
			if _, err := on(turn).step(ctx, id, s, turn); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	byNode := func(turn int) map[string]int {
		mu.Lock()
		defer mu.Unlock()
		n := map[string]int{}
		for s := range extClusterSessions {
			for _, r := range asked[key{s, turn}] {
				n[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]++
			}
		}
		return n
	}
	for turn := 1; turn <= 2; turn++ {
		want := map[string]int{clusterNodeKey(0): extClusterSessions}
		if d := cmp.Diff(want, byNode(turn)); d != "" {
			t.Fatalf("turn %d, stepped on node %d: model requests by node key (-want +got): not every step was forwarded to the owner, node 0\n%s", turn, turn, d)
		}
	}

	// Node 0 dies idle; its sessions continue on nodes 1 and 2.
	_ = nodes[0].cmd.Process.Kill() // SIGKILL
	killedAt := time.Now()
	_, _ = nodes[0].cmd.Process.Wait()
	var tookMu sync.Mutex
	var took time.Duration
	if err := live.parallel(ctx, extClusterSessions, func(s int) error {
		for turn := 3; turn <= clusterTurns; turn++ {
			if _, err := on(1+(s+turn)%2).step(ctx, ids[s], s, turn); err != nil {
				return err
			}
			if turn == 3 {
				tookMu.Lock()
				took = max(took, time.Since(killedAt))
				tookMu.Unlock()
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("every session of node 0 stepped on nodes 1 and 2 within %v of its kill (lease %v)", took.Round(time.Millisecond), extClusterLease)
	if limit := extClusterLease + 5*time.Second; took > limit {
		t.Errorf("node 0's sessions were taken over %v after its kill, over the lease plus 5 s (%v)", took.Round(time.Millisecond), limit)
	}
	for turn := 3; turn <= clusterTurns; turn++ {
		got := byNode(turn)
		if got[clusterNodeKey(0)] != 0 || got[clusterNodeKey(1)]+got[clusterNodeKey(2)] != extClusterSessions {
			t.Errorf("turn %d, after node 0's kill: model requests by node key %v, want %d from nodes 1 and 2", turn, got, extClusterSessions)
		}
	}

	if err := live.parallel(ctx, extClusterSessions, func(s int) error { return live.checkTranscript(ctx, ids[s], s) }); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for s := range extClusterSessions {
		for turn := 1; turn <= clusterTurns; turn++ {
			rs := asked[key{s, turn}]
			if len(rs) != 1 {
				t.Errorf("session %d turn %d was sent to the model %d times, want once", s, turn, len(rs))
				continue
			}
			if turn == 1 {
				continue
			}
			if prev := asked[key{s, turn - 1}]; len(prev) == 1 { // else reported above
				if err := extendsTurn(prev[0].Messages, rs[0].Messages, s, turn); err != nil {
					t.Error(err)
				}
			}
		}
	}
}
