package reward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/httpedge"
)

// Routes of the reward server. OpenRLHF posts to the URL it is given
// (--reward.remote_url); GetRewardPath is the path of OpenRLHF's own reward
// server (openrlhf/cli/serve_rm.py), so a URL that worked there works here.
const (
	BatchPath     = "/v1/rewards:batch"
	GetRewardPath = "/get_reward"
	SlimePath     = "/slime"
	VerifyPath    = "/verify"
)

// SettingMaxBatch names HandlerOptions.MaxBatch in [httpedge.Edge.Hints]:
// a batch over it is refused with that setting's hint.
const SettingMaxBatch = "MaxBatch"

// HandlerOptions tune a [Handler]; nil means every default.
type HandlerOptions struct {
	// APIKey, when set, is required as "Authorization: Bearer KEY" on every
	// route but /health.
	APIKey string
	// Edge is the HTTP edge, the same as serve's (see [httpedge.Edge]):
	// Host and Origin allow-lists on every route (/health included), JSON
	// bodies, timeouts, the connection limit, and the hints naming the
	// operator's settings (MaxBatch among them) in refusals. The zero value
	// is the safe default; entries that [httpedge.Edge.Validate] refuses
	// are ignored.
	Edge httpedge.Edge
	// DataSource is the domain assumed for trainer requests that name none
	// (OpenRLHF and slime labels that are plain ground truths); "" means
	// the generic judge prompt and domain-independent rules.
	DataSource string
	// Scale multiplies the numbers the trainer routes return (OpenRLHF,
	// slime, NeMo Gym); 0 means 1, the published [0, 25] range. 0.04 maps
	// it to [0, 1].
	Scale float64
	// MaxBodyBytes bounds a request body, refused unread when its declared
	// length is larger; 0 means 64 MiB.
	MaxBodyBytes int64
	// MaxBatch bounds the items of one request; 0 means 4096.
	MaxBatch int
	// BatchOnly serves the native batch API alone (with /health and
	// /metrics), leaving out the trainer routes (OpenRLHF, slime, NeMo
	// Gym). Those must answer a number for every item, so a scorer that
	// drops items (PolicyDrop) is refused unless BatchOnly is set; false
	// (the default) serves every route.
	BatchOnly bool
	// Metrics, when set, receives request and result observations, and
	// /metrics serves Registry.
	Metrics  *Metrics
	Registry prometheus.Gatherer
	// Logger receives request failures; nil discards.
	Logger *slog.Logger
}

// Handler serves a [Scorer] over HTTP: the native batch API and the routes
// OpenRLHF, slime and NeMo Gym call, plus /health and /metrics.
type Handler struct {
	s    *Scorer
	o    HandlerOptions
	mux  *http.ServeMux
	log  *slog.Logger
	gate *httpedge.Guard
}

// ErrDropOnTrainerRoute refuses a handler whose scorer drops items on
// judge failure while it serves routes that cannot leave an item out.
var ErrDropOnTrainerRoute = errors.New("the judge-failure policy drop leaves items without a score, which " +
	GetRewardPath + ", " + SlimePath + " and " + VerifyPath + " cannot leave out of a policy update (they would read 0)")

// NewHandler makes the HTTP handler of s. It refuses (ErrDropOnTrainerRoute)
// a scorer with PolicyDrop unless o.BatchOnly: a trainer route would have
// to turn a dropped item into a silent 0.
func NewHandler(s *Scorer, opts *HandlerOptions) (*Handler, error) {
	var o HandlerOptions
	if opts != nil {
		o = *opts
	}
	if s.o.OnJudgeFailure == PolicyDrop && !o.BatchOnly {
		return nil, ErrDropOnTrainerRoute
	}
	if o.Scale == 0 {
		o.Scale = 1
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 64 << 20
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 4096
	}
	h := &Handler{s: s, o: o, mux: http.NewServeMux(), log: o.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	eo := &httpedge.Options{APIKey: o.APIKey, MaxBodyBytes: o.MaxBodyBytes, Logger: h.log}
	gate, err := httpedge.New(o.Edge, eo)
	if err != nil {
		h.log.Warn("ignoring the allowed hosts and origins", "err", err)
		e := o.Edge
		e.AllowedHosts, e.AllowedOrigins = nil, nil
		gate, _ = httpedge.New(e, eo)
	}
	h.gate = gate
	h.route("POST "+BatchPath, h.batch)
	if !o.BatchOnly {
		h.route("POST "+GetRewardPath, h.openRLHF)
		h.route("POST "+SlimePath, h.slime)
		h.route("POST "+VerifyPath, h.verify)
		h.route("POST "+SeedSessionPath, h.seedSession)
		h.route("POST "+AggregateMetricsPath, h.aggregateMetrics)
	}
	// Health answers without auth, for probes, but only to this server's
	// own names (a probe names it by a loopback name or an IP address).
	h.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if ref := h.gate.AdmitOpen(w, r); ref != nil {
			writeRefusal(w, ref)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "judge": s.JudgeModel()})
	})
	if o.Registry != nil {
		h.route("GET /metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{}).ServeHTTP)
	}
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// route registers f behind the edge (Host, Origin, bearer token, JSON
// body within its limit, read before f runs) and metrics.
func (h *Handler) route(pattern string, f http.HandlerFunc) {
	name := pattern[strings.IndexByte(pattern, ' ')+1:]
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		sw := h.gate.Writer(w) // its Start is the request's start
		if h.o.Metrics != nil {
			defer func() { h.o.Metrics.observeRequest(name, sw.Status, time.Since(sw.Start)) }()
		}
		if ref := h.gate.Admit(sw, r); ref != nil {
			writeRefusal(sw, ref)
			return
		}
		f(sw, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg}})
}

// writeRefusal answers a request the edge refused, naming the request
// part at fault.
func writeRefusal(w http.ResponseWriter, ref *httpedge.Refusal) {
	writeJSON(w, ref.Status, map[string]any{"error": map[string]any{"message": ref.Message, "field": ref.Field, "code": ref.Code}})
}

// decode reads the request body (already read and bounded by the edge)
// into v; on failure it answers 400 naming what is wrong and returns false.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(r.Body).Decode(v)
	if err == nil {
		return true
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("empty body")
	}
	writeError(w, http.StatusBadRequest, "field body: "+err.Error())
	return false
}

func (h *Handler) tooMany(w http.ResponseWriter, n int) bool {
	if n > h.o.MaxBatch {
		msg := fmt.Sprintf("field items: %d items exceed the limit of %d per request", n, h.o.MaxBatch)
		writeError(w, http.StatusRequestEntityTooLarge, h.o.Edge.WithHint(msg, SettingMaxBatch))
		return true
	}
	return false
}

func (h *Handler) score(ctx context.Context, items []Item) []Result {
	res := h.s.ScoreBatch(ctx, items)
	if h.o.Metrics != nil {
		for i := range res {
			h.o.Metrics.observeResult(&res[i])
		}
	}
	return res
}

// BatchRequest is the native batch API's request.
type BatchRequest struct {
	Items []Item `json:"items"`
}

// BatchResponse is the native batch API's answer: one result per item, in
// order, and the scorer's running totals.
type BatchResponse struct {
	Results []Result `json:"results"`
	Stats   Stats    `json:"stats"`
}

func (h *Handler) batch(w http.ResponseWriter, r *http.Request) {
	var req BatchRequest
	if !h.decode(w, r, &req) || h.tooMany(w, len(req.Items)) {
		return
	}
	for i, it := range req.Items {
		if it.Response == "" && it.GroundTruth == "" && len(it.ExtraInfo) == 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("field items[%d]: neither response nor ground_truth is set", i))
			return
		}
	}
	writeJSON(w, http.StatusOK, BatchResponse{Results: h.score(r.Context(), req.Items), Stats: h.s.Stats()})
}

// label is what a trainer's label (OpenRLHF labels, slime label) may carry:
// a JSON object naming the ground truth, the domain and the action, or a
// plain string that is the ground truth itself.
type label struct {
	GroundTruth string          `json:"ground_truth"`
	DataSource  string          `json:"data_source"`
	Action      string          `json:"action"`
	ExtraInfo   json.RawMessage `json:"extra_info"`
}

// itemOf builds an item from a trainer's prompt (text, or messages),
// response and label.
func (h *Handler) itemOf(id, prompt string, msgs []Message, response string, raw json.RawMessage) (Item, error) {
	it := Item{ID: id, DataSource: h.o.DataSource, Response: response}
	it.setPrompt(prompt, msgs)
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		// A label string holding a JSON object is the object.
		if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") && strings.Contains(t, `"ground_truth"`) {
			raw = json.RawMessage(t)
		} else {
			it.GroundTruth = s
			return it, nil
		}
	}
	var l label
	if err := json.Unmarshal(raw, &l); err != nil {
		return it, fmt.Errorf("label: want a string or an object with ground_truth: %v", err)
	}
	it.GroundTruth, it.ExtraInfo = l.GroundTruth, l.ExtraInfo
	if l.DataSource != "" {
		it.DataSource = l.DataSource
	}
	if l.Action != "" && len(it.Messages) == 0 {
		it.Prompt = l.Action
	}
	return it, nil
}

// actionOf finds the current action in a rendered prompt: the text from
// the last "### Turn" heading to the end of that user message (chat-template
// end markers cut), read as a user message when it is one (world state,
// control text and answer reminder dropped); the whole prompt when it has
// no heading.
func actionOf(prompt string) string {
	if i := strings.LastIndex(prompt, "### Turn "); i >= 0 {
		prompt = prompt[i:]
	}
	for _, end := range []string{"<|im_end|>", "<|eot_id|>", "<|end|>", "</s>", "<end_of_turn>"} {
		if i := strings.Index(prompt, end); i >= 0 {
			prompt = prompt[:i]
		}
	}
	prompt = strings.TrimRight(prompt, " \n")
	if n, action, _, _, err := conversation.ParseUserMessage(prompt); err == nil {
		return conversation.ActionPrompt(n, action)
	}
	if i := strings.Index(prompt, conversation.AnswerReminder); i >= 0 {
		prompt = prompt[:i]
	}
	return strings.TrimSpace(prompt)
}

// openRLHFRequest is what OpenRLHF's SingleTurnAgentExecutor posts
// (openrlhf/utils/agent.py, _fetch_rewards_via_http): query is prompt plus
// response as one decoded text, prompts the prompts, labels the labels.
type openRLHFRequest struct {
	Query   []string          `json:"query"`
	Prompts []string          `json:"prompts"`
	Labels  []json.RawMessage `json:"labels"`
}

// openRLHFResponse is what it reads back: rewards, scores, and per-sample
// extra_logs.
type openRLHFResponse struct {
	Rewards   []float64            `json:"rewards"`
	Scores    []float64            `json:"scores"`
	ExtraLogs map[string][]float64 `json:"extra_logs"`
}

func (h *Handler) openRLHF(w http.ResponseWriter, r *http.Request) {
	var req openRLHFRequest
	if !h.decode(w, r, &req) || h.tooMany(w, len(req.Query)) {
		return
	}
	if len(req.Labels) != len(req.Query) || (len(req.Prompts) != 0 && len(req.Prompts) != len(req.Query)) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("fields query, prompts, labels: lengths %d, %d, %d differ", len(req.Query), len(req.Prompts), len(req.Labels)))
		return
	}
	items := make([]Item, len(req.Query))
	for i, q := range req.Query {
		prompt := ""
		if len(req.Prompts) > 0 {
			prompt = req.Prompts[i]
		}
		// The query is the prompt and the response decoded together; the
		// response is what follows the prompt.
		resp := strings.TrimPrefix(q, prompt)
		it, err := h.itemOf(fmt.Sprint(i), prompt, nil, resp, req.Labels[i])
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("field labels[%d]: %v", i, err))
			return
		}
		items[i] = it
	}
	res := h.score(r.Context(), items)
	out := openRLHFResponse{Rewards: make([]float64, len(res)), Scores: make([]float64, len(res)), ExtraLogs: map[string][]float64{}}
	for _, k := range []string{"rubric", "rule", "judge_failed", "dropped"} {
		out.ExtraLogs[k] = make([]float64, len(res))
	}
	for i := range res {
		v := res[i].Value() * h.o.Scale
		out.Rewards[i], out.Scores[i] = v, v
		out.ExtraLogs["rubric"][i] = res[i].Components.Rubric * h.o.Scale
		out.ExtraLogs["rule"][i] = res[i].Components.Rule * h.o.Scale
		out.ExtraLogs["judge_failed"][i] = oneIf(res[i].Judge.Failed)
		out.ExtraLogs["dropped"][i] = oneIf(res[i].Dropped)
	}
	writeJSON(w, http.StatusOK, out)
}

func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// slimeRequest is one sample as slime's remote_rm posts it
// (slime/rollout/rm_hub/__init__.py): the prompt (a string, or chat
// messages), the response text and the label.
type slimeRequest struct {
	Prompt   json.RawMessage `json:"prompt"`
	Response string          `json:"response"`
	Label    json.RawMessage `json:"label"`
}

// slimeResponse becomes sample.reward; slime picks score with
// --reward-key score.
type slimeResponse struct {
	Score       float64 `json:"score"`
	Rubric      float64 `json:"rubric"`
	Rule        float64 `json:"rule"`
	JudgeFailed float64 `json:"judge_failed"`
	Dropped     float64 `json:"dropped"`
}

func (h *Handler) slime(w http.ResponseWriter, r *http.Request) {
	var req slimeRequest
	if !h.decode(w, r, &req) {
		return
	}
	prompt, msgs, err := decodePrompt(req.Prompt)
	if err != nil {
		writeError(w, http.StatusBadRequest, "field prompt: "+err.Error())
		return
	}
	if len(req.Label) == 0 {
		writeError(w, http.StatusBadRequest, "field label: missing (the ground truth)")
		return
	}
	it, err := h.itemOf("0", prompt, msgs, req.Response, req.Label)
	if err != nil {
		writeError(w, http.StatusBadRequest, "field "+err.Error())
		return
	}
	res := h.score(r.Context(), []Item{it})[0]
	writeJSON(w, http.StatusOK, slimeResponse{
		Score: res.Value() * h.o.Scale, Rubric: res.Components.Rubric * h.o.Scale, Rule: res.Components.Rule * h.o.Scale,
		JudgeFailed: oneIf(res.Judge.Failed), Dropped: oneIf(res.Dropped),
	})
}

// contentText reads message content that is a string or a list of parts
// ({type: text|input_text|output_text, text}).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// verify answers NeMo Gym's /verify (nemo_gym/base_resources_server.py):
// the request (responses_create_params, response, and the dataset row's
// own fields) comes back with reward added, plus reward_components as in
// BaseMultiRewardVerifyResponse and the components as top-level numbers
// for Gym's aggregate metrics. The row names the ground truth as
// ground_truth (or expected_answer) and the domain as data_source.
func (h *Handler) verify(w http.ResponseWriter, r *http.Request) {
	var body map[string]json.RawMessage
	if !h.decode(w, r, &body) {
		return
	}
	var params struct {
		Input json.RawMessage `json:"input"`
	}
	if raw, ok := body["responses_create_params"]; ok {
		if err := json.Unmarshal(raw, &params); err != nil {
			writeError(w, http.StatusBadRequest, "field responses_create_params: "+err.Error())
			return
		}
	}
	prompt, msgs, err := decodePrompt(params.Input)
	if err != nil {
		writeError(w, http.StatusBadRequest, "field responses_create_params.input: "+err.Error())
		return
	}
	var resp struct {
		Output []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"output"`
	}
	if raw, ok := body["response"]; !ok || json.Unmarshal(raw, &resp) != nil {
		writeError(w, http.StatusBadRequest, "field response: missing or not a Responses API object")
		return
	}
	var text strings.Builder
	for _, o := range resp.Output {
		if o.Type == "message" && o.Role == "assistant" {
			text.WriteString(contentText(o.Content))
		}
	}
	str := func(k string) string {
		var s string
		_ = json.Unmarshal(body[k], &s)
		return s
	}
	it := Item{ID: str("id"), DataSource: str("data_source"), Response: text.String(), GroundTruth: str("ground_truth"), ExtraInfo: body["extra_info"]}
	it.setPrompt(prompt, msgs)
	if it.GroundTruth == "" {
		it.GroundTruth = str("expected_answer")
	}
	if it.DataSource == "" {
		it.DataSource = h.o.DataSource
	}
	res := h.score(r.Context(), []Item{it})[0]
	scale := h.o.Scale
	put := func(k string, v any) {
		b, _ := json.Marshal(v)
		body[k] = b
	}
	put("reward", res.Value()*scale)
	put("reward_components", map[string]float64{"rubric": res.Components.Rubric * scale, "rule": res.Components.Rule * scale})
	put("rubric", res.Components.Rubric*scale)
	put("rule", res.Components.Rule*scale)
	put("judge_failed", oneIf(res.Judge.Failed))
	if res.Reason != "" {
		put("reward_reason", res.Reason)
	}
	writeJSON(w, http.StatusOK, body)
}

// Serve serves h on ln, under the edge's connection limit and timeouts,
// until ctx ends, then drains: it stops accepting, lets requests in flight
// finish (their judge calls included) for up to drain, and then closes
// what is left.
func (h *Handler) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	log := h.log
	srv := h.gate.HTTPServer(h, log)
	ln = h.gate.Listen(ln)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("reward server shutting down: draining requests in flight", "drain", drain)
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := srv.Shutdown(dctx)
	if err != nil {
		_ = srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
