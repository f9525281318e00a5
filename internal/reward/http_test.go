package reward

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/expand"
	"github.com/agentworld/agentworld/internal/trainset"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

func newTestServer(t *testing.T, o *Options, ho *HandlerOptions) (*httptest.Server, *Scorer) {
	t.Helper()
	if o == nil {
		o = &Options{Judge: verdictJudge{}, JudgeModel: "test-judge", RetryWait: 1}
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mustHandler(t, s, ho))
	t.Cleanup(srv.Close)
	return srv, s
}

func mustHandler(t *testing.T, s *Scorer, ho *HandlerOptions) *Handler {
	t.Helper()
	h, err := NewHandler(s, ho)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func post(t *testing.T, url string, body any, header ...string) (int, []byte) {
	t.Helper()
	b, ok := body.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func fixture(t *testing.T, name string) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "conformance", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m["source"]) == 0 {
		t.Fatalf("%s names no source", name)
	}
	return m
}

// TestOpenRLHF posts the payload OpenRLHF's SingleTurnAgentExecutor sends
// and reads the answer the way it does.
func TestOpenRLHF(t *testing.T) {
	srv, _ := newTestServer(t, nil, &HandlerOptions{DataSource: "agentworld/terminal"})
	fx := fixture(t, "openrlhf.json")
	code, body := post(t, srv.URL+GetRewardPath, []byte(fx["request"]))
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var got struct {
		Rewards   []float64            `json:"rewards"`
		Scores    []float64            `json:"scores"`
		ExtraLogs map[string][]float64 `json:"extra_logs"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	// The first sample reproduces the screen (thinking and the trailing
	// end-of-turn token removed): rubric 25, rule 25. The second lists the
	// wrong files: rubric 16 from the judge, rule 0.
	want := []float64{25, 0.9 * 16}
	if len(got.Rewards) != 2 || got.Rewards[0] != want[0] || got.Rewards[1] != want[1] || got.Scores[1] != want[1] {
		t.Errorf("rewards %v scores %v, want %v", got.Rewards, got.Scores, want)
	}
	if r := got.ExtraLogs["rule"]; len(r) != 2 || r[0] != 25 || r[1] != 0 {
		t.Errorf("extra_logs %v", got.ExtraLogs)
	}
}

// TestSlime posts each sample the way slime's remote_rm does and reads the
// number with its --reward-key.
func TestSlime(t *testing.T) {
	srv, _ := newTestServer(t, nil, &HandlerOptions{Scale: 1.0 / 25})
	fx := fixture(t, "slime.json")
	var reqs []json.RawMessage
	var key string
	if err := json.Unmarshal(fx["requests"], &reqs); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(fx["reward_key"], &key)
	want := []float64{1, 0.9 * 16 / 25}
	for i, req := range reqs {
		code, body := post(t, srv.URL+SlimePath, []byte(req))
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, body)
		}
		var reward map[string]float64
		if err := json.Unmarshal(body, &reward); err != nil {
			t.Fatal(err)
		}
		if got := reward[key]; fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", want[i]) {
			t.Errorf("sample %d: reward[%q] = %v, want %v (%s)", i, key, got, want[i], body)
		}
	}
}

// TestNeMoGymVerify posts a verify request shaped like Gym's rollouts and
// checks the reply is the request with reward added.
func TestNeMoGymVerify(t *testing.T) {
	srv, _ := newTestServer(t, nil, nil)
	fx := fixture(t, "nemo_gym.json")
	code, body := post(t, srv.URL+VerifyPath, []byte(fx["request"]))
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var req, got map[string]any
	_ = json.Unmarshal(fx["request"], &req)
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	for k, v := range req {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("field %s not echoed", k)
		}
	}
	comps, _ := got["reward_components"].(map[string]any)
	if got["reward"] != 25.0 || comps["rubric"] != 25.0 || comps["rule"] != 25.0 {
		t.Errorf("reward %v components %v", got["reward"], got["reward_components"])
	}
}

func TestBatchAndErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	s, err := New(&Options{Judge: verdictJudge{}, JudgeModel: "test-judge", RetryWait: 1, OnJudgeCall: m.ObserveJudgeCall})
	if err != nil {
		t.Fatal(err)
	}
	m.RegisterScorer(reg, s)
	srv := httptest.NewServer(mustHandler(t, s, &HandlerOptions{APIKey: "k", Metrics: m, Registry: reg, MaxBatch: 3, MaxBodyBytes: 1 << 16}))
	defer srv.Close()
	auth := []string{"Authorization", "Bearer k"}
	items := BatchRequest{Items: []Item{item("a", tag(screen), screen), item("b", "", screen), item("c", tag("UNPARSEABLE"), screen)}}
	if code, _ := post(t, srv.URL+BatchPath, items); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	code, body := post(t, srv.URL+BatchPath, items, auth...)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var got BatchResponse
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Results) != 3 || got.Results[0].ID != "a" || *got.Results[0].Score != 25 || !strings.HasPrefix(got.Results[1].Reason, "no answer") || got.Results[2].Judge.Fallback != "rules" {
		t.Errorf("%s", body)
	}
	for _, tt := range []struct {
		name string
		body []byte
		code int
		msg  string
	}{
		{"not JSON", []byte("{"), 400, "field body"},
		{"too many", []byte(`{"items": [{"response": "a"}, {"response": "a"}, {"response": "a"}, {"response": "a"}]}`), 413, "field items"},
		{"empty item", []byte(`{"items": [{"id": "x"}]}`), 400, "field items[0]"},
		{"too big", append([]byte(`{"items": [{"response": "`), bytes.Repeat([]byte("a"), 1<<17)...), 413, "exceeds"},
	} {
		code, body := post(t, srv.URL+BatchPath, tt.body, auth...)
		if code != tt.code || !strings.Contains(string(body), tt.msg) {
			t.Errorf("%s: %d %s", tt.name, code, body)
		}
	}
	if code, body := post(t, srv.URL+GetRewardPath, []byte(`{"query": ["a"], "prompts": [], "labels": []}`), auth...); code != 400 || !strings.Contains(string(body), "lengths") {
		t.Errorf("openrlhf mismatch: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{`agentworld_reward_items_total{outcome="judge_fallback"} 1`, `agentworld_reward_items_total{outcome="no_answer"} 1`,
		"agentworld_reward_judge_unparsed_total 3", `agentworld_reward_component_bucket{component="rule"`, `agentworld_reward_http_requests_total{code="401",route="/v1/rewards:batch"} 1`,
		`agentworld_reward_judge_call_seconds_count{outcome="ok"}`} {
		if !strings.Contains(string(text), series) {
			t.Errorf("metrics lack %s", series)
		}
	}
}

// slowFlaky is the acceptance test's judge: every call takes latency, every
// tenth call fails in transport, and it records the most calls in flight.
type slowFlaky struct {
	latency         time.Duration
	calls, inFlight atomic.Int64
	maxInFlight     atomic.Int64
}

func (j *slowFlaky) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	n := j.inFlight.Add(1)
	defer j.inFlight.Add(-1)
	for {
		m := j.maxInFlight.Load()
		if n <= m || j.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	if err := sleepCtx(ctx, j.latency); err != nil {
		return nil, err
	}
	if j.calls.Add(1)%10 == 0 {
		return nil, fmt.Errorf("%w: 503", worldmodel.ErrUnavailable)
	}
	return verdictJudge{}.Complete(ctx, req)
}

// TestLoadAcceptance: 200 concurrent batch requests of 64 items each
// against a judge of 50 ms latency failing every tenth call. Every item is
// answered with a rubric from the judge (no fallback, no silent 0) and the
// judge never sees more calls in flight than the limit.
func TestLoadAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	const perRequest, limit = 64, 128
	requests := 200
	if raceEnabled {
		requests = 50
	}
	j := &slowFlaky{latency: 50 * time.Millisecond}
	srv, s := newTestServer(t, &Options{Judge: j, JudgeModel: "test-judge", MaxConcurrency: limit, RetryWait: time.Millisecond, CacheSize: -1}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var fellBackN atomic.Int64
	errs := make(chan error, requests)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: requests, DialContext: (&net.Dialer{}).DialContext}}
	for r := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var req BatchRequest
			for i := range perRequest {
				id := fmt.Sprintf("%d-%d", r, i)
				// Distinct predictions, so no verdict comes from the cache.
				req.Items = append(req.Items, item(id, tag(screen+"\n"+id), screen))
			}
			b, _ := json.Marshal(req)
			hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+BatchPath, bytes.NewReader(b))
			hr.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(hr)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			var got BatchResponse
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				errs <- err
				return
			}
			if len(got.Results) != perRequest {
				errs <- fmt.Errorf("request %d: %d results", r, len(got.Results))
				return
			}
			for i, res := range got.Results {
				// Judged items have the judge's rubric; an item whose three
				// attempts all met a failing call has the rules fallback,
				// says so, and is counted. None is a silent 0.
				judged := res.Judge.ParseOK && res.Components.Rubric == 16 && res.Reason == ""
				fellBack := res.Judge.Failed && res.Judge.Fallback == "rules" && res.Components.Rubric >= 5 && strings.Contains(res.Reason, "503")
				if res.ID != req.Items[i].ID || res.Score == nil || *res.Score == 0 || !(judged || fellBack) {
					errs <- fmt.Errorf("item %s: %+v", req.Items[i].ID, res)
					return
				}
				if fellBack {
					fellBackN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := s.Stats()
	if j.maxInFlight.Load() > limit || st.MaxInFlight > limit {
		t.Errorf("judge saw %d calls in flight (scorer counted %d), limit %d", j.maxInFlight.Load(), st.MaxInFlight, limit)
	}
	if st.JudgeErrors == 0 || st.JudgeFailed != fellBackN.Load() || st.Fallback != st.JudgeFailed || st.Items != int64(requests*perRequest) {
		t.Errorf("stats %+v", st)
	}
	t.Logf("%d items, %d judge calls (%d failed and retried), %d items fell back after three failed calls, max in flight %d", st.Items, st.JudgeCalls, st.JudgeErrors, st.JudgeFailed, j.maxInFlight.Load())
}

func TestActionOf(t *testing.T) {
	action := "### Turn 3\n**Action:**\n[{\"keystrokes\": \"ls\\n\", \"duration\": 0.1}]"
	user := conversation.UserMessage(3, "[{\"keystrokes\": \"ls\\n\", \"duration\": 0.1}]", "", "the disk is full")
	for _, tt := range []struct{ in, want string }{
		{"<|im_start|>system\nsim<|im_end|>\n<|im_start|>user\n### Turn 2\n**Action:**\nx\n\n" + conversation.AnswerReminder + "<|im_end|>\n<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n", action},
		{user, action},
		{"just a question", "just a question"},
		{"", ""},
	} {
		if got := actionOf(tt.in); got != tt.want {
			t.Errorf("actionOf(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestExportedRLRow scores a row of `data export --mode rl` the way the
// verl shim (examples/trainers/verl_reward.py) does: data_source names the
// domain, reward_model.ground_truth is the truth, extra_info.action the
// judge's current turn.
func TestExportedRLRow(t *testing.T) {
	obs := "root@box:/app# ls\ncalc.py\nroot@box:/app#"
	s := &expand.Sample{ID: "t#2", Domain: "terminal", Turn: 2, TotalTurns: 2, Action: `[{"keystrokes": "ls\n", "duration": 0.1}]`, Observation: obs}
	row := trainset.RLRowOf(s, "train", "model")
	var seen string
	sc, err := New(&Options{Judge: completerFunc(func(req worldmodel.Request) {
		seen = req.Messages[1].Content
	}), JudgeModel: "j"})
	if err != nil {
		t.Fatal(err)
	}
	extra, _ := json.Marshal(map[string]any{"action": row.ExtraInfo.Action, "id": row.ExtraInfo.ID})
	r := sc.Score(context.Background(), Item{ID: row.ExtraInfo.ID, DataSource: row.DataSource, Response: s.Target(), GroundTruth: row.RewardModel.GroundTruth, ExtraInfo: extra})
	if r.Components.Rule != 25 || r.Components.Rubric != 25 || !strings.Contains(seen, "# Current Turn:\n\n### Turn 2\n**Action:**\n[{\"keystrokes\"") {
		t.Errorf("%+v\njudge saw:\n%s", r, seen)
	}
}

// completerFunc is a judge that shows each request to f and answers like
// verdictJudge.
type completerFunc func(worldmodel.Request)

func (f completerFunc) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	f(req)
	return verdictJudge{}.Complete(ctx, req)
}

// TestServeDrains: cancelling Serve's context lets a batch whose judge
// calls are in flight finish and be answered, then Serve returns.
func TestServeDrains(t *testing.T) {
	s, err := New(&Options{Judge: slowJudge{300 * time.Millisecond}, JudgeModel: "j"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	h := mustHandler(t, s, nil)
	go func() { served <- h.Serve(ctx, ln, 10*time.Second) }()
	answered := make(chan int, 1)
	go func() {
		b, _ := json.Marshal(BatchRequest{Items: []Item{item("a", tag(screen), screen)}})
		resp, err := http.Post("http://"+ln.Addr().String()+BatchPath, "application/json", bytes.NewReader(b))
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	for s.Stats().InFlight == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if code := <-answered; code != http.StatusOK {
		t.Errorf("the request in flight got %d, want 200", code)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
