package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/envconfig"
	_ "github.com/agentworld/agentworld/internal/natsserver" // the nodes' embedded NATS servers
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// TestHelperClusterNode is one agentworld node of TestClusterSurvivesNodeKill
// (serve with the arguments the parent gives, as JSON); it does nothing in
// a normal run.
func TestHelperClusterNode(t *testing.T) {
	raw := testkit.ChildEnv(t, "AGENTWORLD_TEST_CLUSTER_NODE", "TestClusterSurvivesNodeKill")
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cmd := New()
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
}

// Sizes of TestClusterSurvivesNodeKill: sessions, each stepped through
// clusterTurns turns, clusterWorkers at a time; the node dies once
// clusterKillShare of all steps are acknowledged.
const (
	clusterSessions  = 1000
	clusterTurns     = 4
	clusterWorkers   = 24
	clusterKillShare = 0.4
	clusterLease     = 2 * time.Second
)

// TestClusterSurvivesNodeKill starts three agentworld nodes as processes,
// each with an embedded NATS server, clustered on loopback; steps many
// sessions through random nodes against a fake model server; kills one
// node with SIGKILL mid-run; and checks that every session continued on
// the others within 5 s of the dead node's lease: every step was
// acknowledged within the lease and 5 s of its first attempt or of the
// kill, whichever came later, and some of the dead node's sessions were
// stepped on by the others after it (a takeover happened); every
// acknowledged turn is in its transcript exactly once, no turn was sent
// to the model again after it was acknowledged (a takeover replays the
// recorded answers), a turn asked again (its step was lost with the node)
// was sent the same request body byte for byte, and each turn's model
// request extends the previous turn's byte for byte.
func TestClusterSurvivesNodeKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster and steps thousands of turns")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()

	answer := regexp.MustCompile(`echo s(\d+) t(\d+)`)
	var reqMu sync.Mutex
	reqAt := map[int]time.Time{}
	fake := fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		reqMu.Lock()
		reqAt[r.Seq] = time.Now()
		reqMu.Unlock()
		m := answer.FindAllStringSubmatch(r.Messages[len(r.Messages)-1].Content, -1)
		if len(m) == 0 {
			return fakellm.Reply{Status: 400}
		}
		last := m[len(m)-1]
		return fakellm.Reply{Content: fmt.Sprintf("out s%s t%s\n", last[1], last[2]), PromptTokens: 10, CompletionTokens: 3}
	})
	t.Cleanup(fake.Close)

	start := time.Now()
	// Each node sends its own API key, so that a request node 0 sent just
	// before its kill, which the fake may read only after it, is known to
	// be node 0's.
	nodes := startCluster(ctx, t, clusterLease, func(i int) ([]string, []string) {
		return []string{"--model", fake.URL, "--max-sessions", "5000"}, []string{envconfig.ModelAPIKey.Name + "=" + clusterNodeKey(i)}
	})
	c := &clusterClient{nodes: nodes, http: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: clusterWorkers}}}
	t.Logf("three nodes healthy after %v", time.Since(start).Round(time.Millisecond))

	// Create every session before the kill: a create whose reply a dying
	// node took with it would leave a session the test cannot name.
	// The node that answered a create owns the session until a takeover.
	start = time.Now()
	ids := make([]string, clusterSessions)
	owner := make([]int, clusterSessions)
	if err := c.parallel(ctx, clusterSessions, func(i int) error {
		id, o, err := c.create(ctx)
		ids[i], owner[i] = id, o
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sessions created in %v", clusterSessions, time.Since(start).Round(time.Millisecond))

	total := clusterSessions * clusterTurns
	var acked atomic.Int64
	var killOnce sync.Once
	var killedAt time.Time
	steps := make([][clusterTurns]posted, clusterSessions)
	ackAt := make([][clusterTurns]time.Time, clusterSessions)
	start = time.Now()
	err := c.parallel(ctx, clusterSessions, func(i int) error {
		for turn := 1; turn <= clusterTurns; turn++ {
			p, err := c.step(ctx, ids[i], i, turn)
			if err != nil {
				return err
			}
			steps[i][turn-1], ackAt[i][turn-1] = p, time.Now()
			if acked.Add(1) >= int64(float64(total)*clusterKillShare) {
				killOnce.Do(func() {
					c.dead.Store(1)                 // node 0
					_ = nodes[0].cmd.Process.Kill() // SIGKILL
					killedAt = time.Now()
				})
			}
		}
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if killedAt.IsZero() {
		t.Fatal("the run ended before the kill")
	}

	// Every session continues within 5 s of the lease: each step's wait,
	// from its first attempt (or the kill, if that came later) to its
	// acknowledgement, whether the first attempt answered (a node holding
	// it through the takeover) or a retry did.
	bound := clusterLease + 5*time.Second
	var longest time.Duration
	var longestS, longestTurn, inFlight, afterKill, retried int
	for s := range clusterSessions {
		for turn := 1; turn <= clusterTurns; turn++ {
			p, acked := steps[s][turn-1], ackAt[s][turn-1]
			if p.attempts > 1 {
				retried++
			}
			if !acked.After(killedAt) {
				continue
			}
			afterKill++
			from := p.first
			if from.Before(killedAt) {
				from = killedAt
				inFlight++
			}
			wait := acked.Sub(from)
			if wait > longest {
				longest, longestS, longestTurn = wait, s, turn
			}
			if wait > bound {
				t.Errorf("session %d (created on n%d) turn %d was acknowledged %v after its first attempt or the kill, more than the lease and 5 s (%v); %d attempts", s, owner[s], turn, wait.Round(time.Millisecond), bound, p.attempts)
			}
		}
	}
	t.Logf("%d steps in %v (%.0f steps/s on this machine, node n0 killed after %d of them); %d steps acknowledged after the kill, %d of them in flight at it; the longest wait from the later of a step's first attempt and the kill to its acknowledgement %v (session %d turn %d, created on n%d; bound %v, lease %v); %d steps retried",
		total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), int(float64(total)*clusterKillShare),
		afterKill, inFlight, longest.Round(time.Millisecond), longestS, longestTurn, owner[longestS], bound, clusterLease, retried)

	// Every acknowledged turn is in the transcript once, with the model's
	// answer for it.
	if err := c.parallel(ctx, clusterSessions, func(i int) error { return c.checkTranscript(ctx, ids[i], i) }); err != nil {
		t.Fatal(err)
	}

	// The model's requests: per session and turn, every request the same
	// bytes (the whole body), none after the turn was acknowledged, each
	// extending the previous turn's.
	type key struct{ s, turn int }
	byTurn := map[key][]*fakellm.Request{}
	reqs := fake.Requests()
	for _, r := range reqs {
		m := answer.FindAllStringSubmatch(r.Messages[len(r.Messages)-1].Content, -1)
		if len(m) == 0 {
			t.Fatalf("model request %d names no session turn", r.Seq)
		}
		s, _ := strconv.Atoi(m[len(m)-1][1])
		turn, _ := strconv.Atoi(m[len(m)-1][2])
		k := key{s, turn}
		byTurn[k] = append(byTurn[k], r)
		reqMu.Lock()
		at := reqAt[r.Seq]
		reqMu.Unlock()
		if s >= clusterSessions || turn < 1 || turn > clusterTurns {
			t.Fatalf("model request %d names session %d turn %d", r.Seq, s, turn)
		}
		// The killed node sent its requests before the kill, however late
		// the fake read them.
		if r.Header.Get("Authorization") == "Bearer "+clusterNodeKey(0) && at.After(killedAt) {
			at = killedAt
		}
		if at.After(ackAt[s][turn-1]) {
			t.Errorf("session %d turn %d was sent to the model again after it was acknowledged (request %d): a recorded answer was re-sampled", s, turn, r.Seq)
		}
	}
	again := len(reqs) - total

	// The killed node's sessions continued elsewhere: some turn of a
	// session n0 created was acknowledged after the kill and sent to the
	// model by another node (its API key). A step another node merely
	// forwarded to n0 would reach the model with n0's key.
	created0, takenOver := 0, 0
	for s := range clusterSessions {
		if owner[s] != 0 {
			continue
		}
		created0++
		for turn := 1; turn <= clusterTurns; turn++ {
			if !ackAt[s][turn-1].After(killedAt) {
				continue
			}
			for _, r := range byTurn[key{s, turn}] {
				if r.Header.Get("Authorization") != "Bearer "+clusterNodeKey(0) {
					takenOver++
					break
				}
			}
		}
	}
	if takenOver == 0 {
		t.Errorf("no turn of the %d sessions node n0 created was acknowledged after its kill with a model request from another node: nothing was taken over", created0)
	}
	t.Logf("%d turns of the %d sessions n0 created were acknowledged after the kill and sampled by another node", takenOver, created0)
	for s := range clusterSessions {
		for turn := 1; turn <= clusterTurns; turn++ {
			rs := byTurn[key{s, turn}]
			if len(rs) == 0 {
				t.Fatalf("session %d turn %d was acknowledged without a model request", s, turn)
			}
			for _, r := range rs[1:] {
				if !bytes.Equal(rs[0].Raw, r.Raw) {
					t.Errorf("session %d turn %d asked again with another request body (-first +again):\n%s", s, turn, cmp.Diff(string(rs[0].Raw), string(r.Raw)))
				}
			}
			if turn == 1 {
				continue
			}
			// The messages as sent: the previous request's array, less its
			// closing bracket, begins this one's.
			prevRaw, curRaw := rawMessages(t, byTurn[key{s, turn - 1}][0]), rawMessages(t, rs[0])
			if open := prevRaw[:len(prevRaw)-1]; !bytes.HasPrefix(curRaw, open) || len(curRaw) <= len(open) || curRaw[len(open)] != ',' {
				t.Errorf("session %d turn %d: the model request's messages do not extend turn %d's byte for byte:\n%s", s, turn, turn-1, cmp.Diff(string(prevRaw), string(curRaw)))
			}
			if err := extendsTurn(byTurn[key{s, turn - 1}][0].Messages, rs[0].Messages, s, turn); err != nil {
				t.Error(err)
			}
		}
	}
	t.Logf("%d model requests for %d acknowledged turns: %d asked again after their step was lost with the node, each byte for byte the same", len(reqs), total, again)
}

// extendsTurn says whether cur, the model request of session s's turn,
// extends prev, its turn-1's, as a session's next turn does: prev's
// messages byte for byte, then the assistant message standing for turn-1's
// recorded answer ("out s<s> t<turn-1>"), then this turn's user message.
func extendsTurn(prev, cur []fakellm.Message, s, turn int) error {
	if len(cur) != len(prev)+2 || !cmp.Equal(cur[:len(prev)], prev) {
		return fmt.Errorf("session %d turn %d: the model request does not extend turn %d's byte for byte:\n%s", s, turn, turn-1, cmp.Diff(prev, cur[:min(len(cur), len(prev))]))
	}
	if a := cur[len(prev)]; a.Role != "assistant" || !strings.Contains(a.Content, fmt.Sprintf("out s%d t%d", s, turn-1)) {
		return fmt.Errorf("session %d turn %d: after turn %d's request comes %+v, not its recorded answer", s, turn, turn-1, a)
	}
	return nil
}

// rawMessages is the "messages" array of r's body, as its bytes arrived.
func rawMessages(t *testing.T, r *fakellm.Request) []byte {
	t.Helper()
	var v struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(r.Raw, &v); err != nil || len(v.Messages) < 2 {
		t.Fatalf("model request %d: no messages array in %s (%v)", r.Seq, r.Raw, err)
	}
	return v.Messages
}

// clusterNode is one node process.
type clusterNode struct {
	url string
	cmd *exec.Cmd
	log string
}

// clusterNodeKey is the model API key of node i.
func clusterNodeKey(i int) string { return fmt.Sprintf("node-%d", i) }

// clusterClient steps sessions through random live nodes.
type clusterClient struct {
	nodes []*clusterNode
	http  *http.Client
	dead  atomic.Int64 // index+1 of the killed node; 0 while none
}

func (c *clusterClient) node() (*clusterNode, int) {
	for {
		i := rand.IntN(len(c.nodes))
		if d := c.dead.Load(); d == 0 || int(d)-1 != i {
			return c.nodes[i], i
		}
	}
}

func (c *clusterClient) waitHealthy(ctx context.Context, n *clusterNode) error {
	// A node that could not start (its port taken meanwhile) never
	// answers: two minutes is far more than forming the cluster takes.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/health", nil)
		resp, err := c.http.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy: %w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// parallel runs fn(0..n-1) on clusterWorkers goroutines; the first error
// stops the others.
func (c *clusterClient) parallel(ctx context.Context, n int, fn func(int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range clusterWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// posted is what post learned of a request that succeeded.
type posted struct {
	// first is when the first attempt was sent: a wait is measured from
	// it (or from the kill), so the time a node held an attempt that
	// then succeeded counts as much as the time spent on retries.
	first time.Time
	// node is the index in the client's nodes of the node that answered:
	// for a create, the session's owner.
	node int
	// attempts is how many requests it took (1 when the first answered).
	attempts int
}

// post sends body to a random live node, retrying (for up to a minute)
// while nodes are unreachable or answer 503: a node died, or a session's
// owner lease has not yet expired. It returns the answer and when and
// where it was given.
func (c *clusterClient) post(ctx context.Context, path string, body any) ([]byte, posted, error) {
	b, _ := json.Marshal(body)
	first := time.Now()
	deadline := first.Add(time.Minute)
	for attempt := 0; ; attempt++ {
		n, i := c.node()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.url+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.http.Do(req)
		var out []byte
		if err == nil {
			out, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if err == nil && resp.StatusCode/100 == 2 {
				return out, posted{first: first, node: i, attempts: attempt + 1}, nil
			}
			// 503: a node or an owner lease is going; 504: a load or an
			// append outran the request while the stream's leader moved
			// (a naming the turn again is safe either way).
			if err == nil && resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusGatewayTimeout {
				return nil, posted{}, fmt.Errorf("POST %s%s: %d %s", n.url, path, resp.StatusCode, out)
			}
			if err == nil {
				err = fmt.Errorf("%d %s", resp.StatusCode, out)
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, posted{}, fmt.Errorf("POST %s: still failing after %v: %w", path, time.Since(first), errors.Join(err, ctx.Err()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// create creates a session and returns its id and the index (in c.nodes)
// of the node that created it, its owner (a create has no session to
// forward).
func (c *clusterClient) create(ctx context.Context) (string, int, error) {
	out, p, err := c.post(ctx, "/v1/sessions", map[string]string{"world_id": "python-terminal"})
	if err != nil {
		return "", 0, err
	}
	var r struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.SessionID == "" {
		return "", 0, fmt.Errorf("create answered %s (%v)", out, err)
	}
	return r.SessionID, p.node, nil
}

func clusterAction(s, turn int) string {
	return fmt.Sprintf(`[{"keystrokes":"echo s%d t%d\n","duration":0.1}]`, s, turn)
}

// step takes turn of session s (id), naming the turn so that a retry of
// a step the dead node had recorded answers from the transcript.
func (c *clusterClient) step(ctx context.Context, id string, s, turn int) (posted, error) {
	out, p, err := c.post(ctx, "/v1/sessions/"+id+"/step", map[string]any{"action": json.RawMessage(clusterAction(s, turn)), "turn": turn})
	if err != nil {
		return p, fmt.Errorf("session %d (%s) turn %d: %w", s, id, turn, err)
	}
	var r struct {
		Observation string `json:"observation"`
		Info        struct {
			Turn int `json:"turn"`
		} `json:"info"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return p, err
	}
	if want := fmt.Sprintf("out s%d t%d", s, turn); r.Info.Turn != turn || !strings.Contains(r.Observation, want) {
		return p, fmt.Errorf("session %d turn %d answered turn %d %q, want %q", s, turn, r.Info.Turn, r.Observation, want)
	}
	return p, nil
}

func (c *clusterClient) checkTranscript(ctx context.Context, id string, s int) error {
	var tr struct {
		Turns []struct {
			Action      string `json:"action"`
			Observation string `json:"observation"`
		} `json:"turns"`
	}
	// A read answered 503 or 504 (a stream electing a leader, an owner
	// that looks dead to a starved node) is asked again, as post does.
	for deadline := time.Now().Add(time.Minute); ; {
		n, _ := c.node()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.url+"/v1/sessions/"+id, nil)
		resp, err := c.http.Do(req)
		if err != nil {
			return err
		}
		if (resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout) && time.Now().Before(deadline) {
			_ = resp.Body.Close()
			time.Sleep(50 * time.Millisecond) // a retry's pause
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&tr)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET session %d (%s) from %s: %d, %v", s, id, n.url, resp.StatusCode, err)
		}
		break
	}
	if len(tr.Turns) != clusterTurns {
		return fmt.Errorf("session %d (%s) has %d turns, want %d (acknowledged): %+v", s, id, len(tr.Turns), clusterTurns, tr.Turns)
	}
	for i, turn := range tr.Turns {
		if !strings.Contains(turn.Action, fmt.Sprintf("echo s%d t%d", s, i+1)) || !strings.Contains(turn.Observation, fmt.Sprintf("out s%d t%d", s, i+1)) {
			return fmt.Errorf("session %d (%s) turn %d is %q -> %q", s, id, i+1, turn.Action, turn.Observation)
		}
	}
	return nil
}
