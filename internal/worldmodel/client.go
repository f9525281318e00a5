// Package worldmodel talks to language world models served behind an
// OpenAI-compatible /v1/chat/completions API (vLLM, SGLang, hosted APIs):
// requests, retries and usage accounting. Reading the prediction out of a
// generation is the job of package conversation (ExtractPrediction).
package worldmodel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"golang.org/x/time/rate"
)

// Message is one chat message. Roles are "system", "user" and "assistant".
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is everything that decides a generation. Its Hash is the cache key:
// two requests with equal hashes are interchangeable.
type Request struct {
	// Model overrides the client's model when set.
	Model    string    `json:"model,omitempty"`
	Messages []Message `json:"messages"`
	// MaxTokens is the generation budget; 0 sends none.
	MaxTokens int `json:"max_tokens,omitempty"`
	// MaxCompletionTokens sends the budget as max_completion_tokens, for APIs
	// that reject max_tokens.
	MaxCompletionTokens bool     `json:"max_completion_tokens,omitempty"`
	Temperature         *float64 `json:"temperature,omitempty"`
	TopP                *float64 `json:"top_p,omitempty"`
	Seed                *int64   `json:"seed,omitempty"`
	// Extra is merged into the request body (vLLM's top_k,
	// chat_template_kwargs, …).
	Extra map[string]any `json:"extra,omitempty"`
}

// Hash is a content hash of the request with the given default model; it
// keys response caches (ids repeat in the published data, content does not).
func (r Request) Hash(defaultModel string) string {
	if r.Model == "" {
		r.Model = defaultModel
	}
	b, _ := json.Marshal(r) // maps marshal with sorted keys: stable
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Response is one generation with what it cost.
type Response struct {
	Content string `json:"content"`
	// Reasoning is the server-separated thinking (reasoning_content or
	// reasoning), empty when the server returns none.
	Reasoning        string `json:"reasoning_content,omitempty"`
	FinishReason     string `json:"finish_reason"`
	Model            string `json:"model,omitempty"`
	PromptTokens     int    `json:"prompt_tokens"`
	CompletionTokens int    `json:"completion_tokens"`
	CachedTokens     int    `json:"cached_tokens,omitempty"`
	LatencyMS        int64  `json:"latency_ms"`
	// Attempts counts HTTP attempts, retries included.
	Attempts int `json:"attempts"`
	// ServedBy names the replica that answered, when a router chose one.
	ServedBy string `json:"served_by,omitempty"`
}

// Truncated reports a generation cut by the token budget, the most common
// real cause of empty predictions.
func (r *Response) Truncated() bool { return r.FinishReason == "length" }

// Completer produces generations. The HTTP client implements it; so do the
// record-and-replay backend and routers over replicas.
type Completer interface {
	Complete(ctx context.Context, req Request) (*Response, error)
}

// Sentinel errors, matched with errors.Is.
var (
	// ErrUnavailable means the server could not be reached or kept failing
	// (transport errors, 429, 5xx) after every retry.
	ErrUnavailable = errors.New("world model unavailable")
	// ErrRejected means the server refused the request (4xx other than 429).
	ErrRejected = errors.New("world model rejected the request")
	// ErrNoChoices means the server answered without a choice.
	ErrNoChoices = errors.New("world model returned no choices")
)

// Options tunes a Client. The zero value of each field is a usable default.
type Options struct {
	// APIKey is sent as a bearer token; empty sends a placeholder, which
	// local vLLM and SGLang servers accept.
	APIKey string
	// MaxRetries after the first attempt on 408/409/429/5xx and dropped
	// connections, with exponential backoff and jitter; 0 means 4, negative
	// means none.
	MaxRetries int
	// Timeout bounds one attempt; 0 means 10 minutes (thinking models spend
	// minutes on long prompts).
	Timeout time.Duration
	// MaxRetryDelay caps one backoff wait; 0 means 8 seconds.
	MaxRetryDelay time.Duration
	// Limiter, when set, is waited on before every request.
	Limiter *rate.Limiter
	// HTTPClient replaces the default transport; nil means one that keeps up
	// to 512 idle connections per host (see pooledHTTPClient).
	HTTPClient *http.Client
	// Logger receives retry and failure logs; nil discards them.
	Logger *slog.Logger
}

// Client calls one OpenAI-compatible endpoint.
type Client struct {
	api     openai.Client
	model   string
	baseURL string
	opts    Options
	log     *slog.Logger
	// tokenizeAt remembers which of tokenizeURLs answered (1-based; 0 not
	// known yet).
	tokenizeAt atomic.Int32
}

// New makes a client for baseURL (e.g. http://localhost:8000/v1) and model.
func New(baseURL, model string, opts *Options) *Client {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 4
	}
	if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.MaxRetryDelay == 0 {
		o.MaxRetryDelay = 8 * time.Second
	}
	if o.APIKey == "" {
		o.APIKey = "EMPTY"
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ro := []option.RequestOption{
		option.WithBaseURL(baseURL),
		option.WithAPIKey(o.APIKey),
		option.WithMaxRetries(o.MaxRetries),
		option.WithMaxRetryDelay(o.MaxRetryDelay),
		// The per-attempt timeout lives in a middleware rather than
		// option.WithRequestTimeout: the SDK gives up without retrying when its
		// own attempt deadline fires, and a slow attempt is exactly what a
		// retry is for.
		option.WithMiddleware(attemptTimeout(o.Timeout)),
	}
	if o.HTTPClient == nil {
		o.HTTPClient = pooledHTTPClient()
	}
	ro = append(ro, option.WithHTTPClient(o.HTTPClient))
	return &Client{api: openai.NewClient(ro...), model: model, baseURL: baseURL, opts: o, log: log}
}

// pooledHTTPClient keeps enough idle connections for many concurrent
// sessions or samples. net/http's default transport keeps 2 idle connections
// per host, so 256 concurrent calls to one model server would open and tear
// down a TCP connection on almost every request, which shows up as
// tens-of-milliseconds latency tails and TIME_WAIT sockets.
func pooledHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 512
	return &http.Client{Transport: tr}
}

// Model is the model name requests default to.
func (c *Client) Model() string { return c.model }

// BaseURL is the endpoint the client calls.
func (c *Client) BaseURL() string { return c.baseURL }

// Complete sends one chat completion, retrying transient failures.
func (c *Client) Complete(ctx context.Context, req Request) (*Response, error) {
	if c.opts.Limiter != nil {
		if err := c.opts.Limiter.Wait(ctx); err != nil {
			return nil, err
		}
	}
	model := req.Model
	if model == "" {
		model = c.model
	}
	body, err := encodeChatRequest(newChatRequest(req, model))
	if err != nil {
		return nil, err
	}
	var attempts atomic.Int32
	// The answer is taken as bytes and decoded here, whatever content type
	// the server labels it with (the SDK refuses JSON not labelled as such).
	var raw []byte
	ro := []option.RequestOption{
		option.WithRequestBody("application/json", body),
		option.WithResponseBodyInto(&raw),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			n := attempts.Add(1)
			resp, err := next(r)
			if n > 1 || err != nil || (resp != nil && resp.StatusCode >= 400) {
				status := 0
				if resp != nil {
					status = resp.StatusCode
				}
				c.log.Debug("world model attempt", "url", c.baseURL, "attempt", n, "status", status, "err", err)
			}
			return resp, err
		})}
	// Extra fields go in after the body is set: WithJSONSet edits it.
	keys := make([]string, 0, len(req.Extra))
	for k := range req.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ro = append(ro, option.WithJSONSet(k, req.Extra[k]))
	}
	start := time.Now()
	// The SDK's typed params stay empty: the body and the answer's target are
	// replaced by the options above (see wire.go for why).
	_, err = c.api.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{}, ro...)
	lat := time.Since(start)
	if err != nil {
		return nil, classify(err, int(attempts.Load()))
	}
	var answer chatResponse
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("%w: the answer is not a chat completion (%v): %.200q", ErrUnavailable, err, raw)
	}
	resp, ok := answer.toResponse()
	if !ok {
		return nil, ErrNoChoices
	}
	resp.LatencyMS = lat.Milliseconds()
	resp.Attempts = int(attempts.Load())
	return resp, nil
}

// attemptTimeout bounds one HTTP attempt, the response body included. It
// reads the body inside the deadline so that a timed-out or cut-off attempt
// surfaces as a transport error, which the SDK retries with backoff.
func attemptTimeout(d time.Duration) option.Middleware {
	return func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		resp, err := next(r.WithContext(ctx))
		if err != nil {
			if r.Context().Err() == nil && ctx.Err() != nil {
				return nil, fmt.Errorf("attempt timed out after %s: %w", d, err)
			}
			return nil, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			if r.Context().Err() == nil && ctx.Err() != nil {
				return nil, fmt.Errorf("attempt timed out after %s reading the answer: %w", d, err)
			}
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
}

// classify maps a client error to a sentinel so callers can tell a dead
// backend (retry later, count as transport failure) from a bad request.
func classify(err error, attempts int) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if attempts > 0 {
			return fmt.Errorf("%w after %d attempts: %w", ErrUnavailable, attempts, err)
		}
		return err
	}
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		code := apiErr.StatusCode
		msg := apiErr.Message
		if msg == "" {
			msg = strconv.Itoa(code) + " " + http.StatusText(code)
		}
		if code == 429 || code >= 500 || code == 408 || code == 409 {
			return fmt.Errorf("%w: HTTP %d after %d attempts: %s", ErrUnavailable, code, attempts, msg)
		}
		return fmt.Errorf("%w: HTTP %d: %s", ErrRejected, code, msg)
	}
	return fmt.Errorf("%w after %d attempts: %w", ErrUnavailable, attempts, err)
}
