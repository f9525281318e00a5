package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentworld/agentworld/internal/journal"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
	"github.com/agentworld/agentworld/internal/world"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// trackerYAML is a small MCP world whose success rule fires when the last
// tool result says the issue is closed.
const trackerYAML = `
name: tracker
domain: mcp
task_description: An issue tracker's MCP server.
action_space:
  - name: get_issue
    description: Fetch one issue.
    input_schema: {type: object, properties: {key: {type: string}}, required: [key]}
initial_state: Project WS has 8 issues.
reward:
  tool_error: -0.5
  success: {final_observation: 'status closed'}
`

// issueKey reads the key of a get_issue call in a world-model prompt.
var issueKey = regexp.MustCompile(`WS-(\d+)`)

// fakeWorld starts a fake world model (odd issues are closed) and a
// manager over it holding the tracker world.
func fakeWorld(t testing.TB) (*sim.Manager, *fakellm.Server) {
	t.Helper()
	return newFakeWorld(t, false)
}

// newFakeWorld is fakeWorld; with forget the fake world model drops each
// request once answered, so a long benchmark's heap holds only what the
// driver and the simulator keep.
func newFakeWorld(t testing.TB, forget bool) (*sim.Manager, *fakellm.Server) {
	t.Helper()
	var model *fakellm.Server
	model = fakellm.New(func(r *fakellm.Request) fakellm.Reply {
		if forget {
			model.Reset()
		}
		last := r.Messages[len(r.Messages)-1].Content
		m := issueKey.FindAllStringSubmatch(last, -1)
		status := "open"
		key := "?"
		if len(m) > 0 {
			key = m[len(m)-1][1]
			var n int
			fmt.Sscan(key, &n)
			if n%2 == 1 {
				status = "closed"
			}
		}
		obs := fmt.Sprintf(`{"content":[{"type":"text","text":"issue WS-%s status %s"}],"isError":false}`, key, status)
		return fakellm.Reply{Content: "<predicted_observation>" + obs + "</predicted_observation>", FinishReason: "stop"}
	})
	t.Cleanup(model.Close)
	spec, err := world.Parse([]byte(trackerYAML), "tracker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := sim.New(&sim.Options{
		Worlds:   map[string]*world.Spec{"tracker": spec},
		Backends: map[string]sim.BackendFactory{sim.BackendModel: sim.NewModelBackend(worldmodel.New(model.URL, "fake-lwm", &worldmodel.Options{MaxRetries: -1}), &sim.ModelOptions{MaxTokens: 256})},
	})
	t.Cleanup(func() { m.Close(context.Background()) })
	return m, model
}

// policyTurn is the token fields the fake policy sends for a turn, with
// literals a re-encoding would change (exponents, trailing zeros).
func policyTurn(n int) (prompt, gen, logprobs string) {
	prompt = fmt.Sprintf("[151644,%d,8948,198]", 1000+n)
	gen = fmt.Sprintf("[%d,151645]", 2000+n)
	logprobs = fmt.Sprintf(`[-1.5e-05,-0.%d250]`, n)
	return
}

// fakePolicy is an OpenAI-compatible policy server scripted by pick,
// which sees the request's messages and returns (tool call arguments or
// "" for a final text answer). It counts every request and records its
// body unless forget is set (before the first request).
type fakePolicy struct {
	srv    *httptest.Server
	forget bool
	count  atomic.Int64
	mu     sync.Mutex
	reqs   []policyReq
}

type policyReq struct {
	Path string
	Body []byte
}

func newFakePolicy(t testing.TB, pick func(msgs []Message) string) *fakePolicy {
	p := &fakePolicy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.count.Add(1)
		if !p.forget {
			p.mu.Lock()
			p.reqs = append(p.reqs, policyReq{r.URL.Path, body})
			p.mu.Unlock()
		}
		var req struct {
			Messages []Message `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		turn := 0
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				turn++
			}
		}
		prompt, gen, lp := policyTurn(turn)
		args := pick(req.Messages)
		msg := `{"role":"assistant","content":"done"}`
		if args != "" {
			a, _ := json.Marshal(args)
			msg = fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"get_issue","arguments":%s}}]}`, turn, a)
		}
		var lps []string
		for _, v := range strings.Split(strings.Trim(lp, "[]"), ",") {
			lps = append(lps, fmt.Sprintf(`{"token":"x","logprob":%s,"top_logprobs":[]}`, v))
		}
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"pol","prompt_token_ids":%s,"choices":[{"index":0,"message":%s,"token_ids":%s,"logprobs":{"content":[%s]},"finish_reason":"stop"}]}`,
			prompt, msg, gen, strings.Join(lps, ","))
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakePolicy) requests() []policyReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]policyReq(nil), p.reqs...)
}

// byInstruction calls get_issue on the key named in the task instruction,
// then answers in text.
func byInstruction(msgs []Message) string {
	for _, m := range msgs {
		if m.Role == "tool" {
			return ""
		}
	}
	k := issueKey.FindString(msgs[1].Content)
	return fmt.Sprintf(`{"key":%q}`, k)
}

// readRows decodes every row of a journal.
func readRows(path string) ([]Row, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	var rows []Row
	err := journal.Rows(path, nil, func(r *Row, _ []byte, _ int64) error { rows = append(rows, *r); return nil })
	return rows, err
}
