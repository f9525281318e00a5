// Package worldmodel talks to language world models served behind an
// OpenAI-compatible /v1/chat/completions API (vLLM, SGLang, hosted APIs):
// requests, retries and usage accounting. Reading the prediction out of a
// generation is the job of package conversation (ExtractPrediction).
package worldmodel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

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
	// ErrResponseTooLarge means an answer's body exceeded the response cap
	// (Options.MaxResponseBytes). It wraps ErrUnavailable: the server is
	// misbehaving, not the request.
	ErrResponseTooLarge = fmt.Errorf("%w: answer larger than the response cap", ErrUnavailable)
)

// DefaultMaxResponseBytes is the response cap when Options.MaxResponseBytes
// is 0. A chat completion of a 32k-token budget is a few hundred KiB of
// JSON; 16 MiB leaves a wide margin while keeping one broken or hostile
// server from taking the memory of every session the process holds.
const DefaultMaxResponseBytes = 16 << 20

// DefaultTimeout bounds one attempt when Options.Timeout is 0: thinking
// models spend minutes on long prompts.
const DefaultTimeout = 10 * time.Minute

// Options tunes a Client. The zero value of each field is a usable default.
type Options struct {
	// APIKey is sent as a bearer token; empty sends a placeholder, which
	// local vLLM and SGLang servers accept.
	APIKey string
	// MaxRetries after the first attempt on 408/409/429/5xx, timeouts and
	// dropped connections, with exponential backoff and jitter; 0 means 4,
	// negative means none.
	MaxRetries int
	// Timeout bounds one attempt, reading the answer included; 0 means
	// DefaultTimeout. An attempt that times out is retried like a dropped
	// connection.
	Timeout time.Duration
	// MaxRetryDelay caps one backoff wait; 0 means 8 seconds.
	MaxRetryDelay time.Duration
	// MaxResponseBytes caps the body of one answer; 0 (or negative) means
	// DefaultMaxResponseBytes. The body is read through the cap, so a larger
	// answer costs at most the cap in memory; it fails with
	// ErrResponseTooLarge and is not retried.
	MaxResponseBytes int64
	// PrefixCacheBytes bounds the encoded request prefixes kept so that a
	// session's next step encodes only its new messages (sessions are told
	// apart by WithAffinity; requests without it are encoded whole); 0 means
	// DefaultPrefixCacheBytes, negative keeps none.
	PrefixCacheBytes int64
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
	model   string
	baseURL string
	// chatURL is baseURL's chat completions endpoint, parsed once here
	// rather than on every call; chatErr is why it did not parse, reported
	// by every call as the parse of each call would.
	chatURL *url.URL
	chatErr error
	opts    Options
	log     *slog.Logger
	// prefixes is nil when Options.PrefixCacheBytes is negative.
	prefixes *prefixCache
	// header, when set, is the header of every request, shared by them:
	// only when HTTPClient is the client's own, which has no cookie jar
	// (the one thing in net/http that writes to a request's header).
	header http.Header
	// followBodies is set when request bodies can be followed (see
	// bodyUse): the client's own transport, to an http:// URL.
	followBodies bool
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
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = 8 * time.Second
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.APIKey == "" {
		o.APIKey = "EMPTY"
	}
	own := o.HTTPClient == nil
	if own {
		o.HTTPClient = pooledHTTPClient()
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{model: model, baseURL: baseURL, opts: o, log: log}
	if own {
		c.header = c.newHeader()
	}
	c.chatURL, c.chatErr = parseURL(strings.TrimRight(baseURL, "/") + "/chat/completions")
	c.followBodies = own && c.chatErr == nil && c.chatURL.Scheme == "http"
	switch {
	case o.PrefixCacheBytes == 0:
		c.prefixes = newPrefixCache(DefaultPrefixCacheBytes)
	case o.PrefixCacheBytes > 0:
		c.prefixes = newPrefixCache(o.PrefixCacheBytes)
	}
	return c
}

// pooledHTTPClient keeps enough idle connections for many concurrent
// sessions or samples. net/http's default transport keeps 2 idle connections
// per host, so 256 concurrent calls to one model server would open and tear
// down a TCP connection on almost every request, which shows up as
// tens-of-milliseconds latency tails and TIME_WAIT sockets. Its write
// buffer holds a whole request of tens of KiB (a long history), so headers
// and body leave in one write, and the transport copies the body through
// that buffer rather than through one it allocates per request; it costs
// 64 KiB per open connection, and open connections are bounded by the
// requests in flight.
func pooledHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 512
	tr.WriteBufferSize = 64 << 10
	return &http.Client{Transport: tr}
}

// Model is the model name requests default to.
func (c *Client) Model() string { return c.model }

// BaseURL is the endpoint the client calls.
func (c *Client) BaseURL() string { return c.baseURL }

// Complete sends one chat completion, retrying transient failures (see
// Options.MaxRetries).
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
	session := Affinity(ctx)
	var use *bodyUse
	if c.followBodies && c.prefixes != nil && session != "" && httptrace.ContextClientTrace(ctx) == nil {
		use = newBodyUse()
		defer use.over.Store(true) // every attempt has returned
	}
	body, prefix, err := encodeChatBody(newChatRequest(req, model), req.Extra, c.prefixes.get(session), use)
	if err != nil {
		return nil, err
	}
	c.prefixes.put(session, prefix)
	start := time.Now()
	var out attempt
	n := 0
	for {
		n++
		out = c.post(ctx, body, use)
		if n > 1 || out.err != nil || out.status >= 400 {
			c.log.Debug("world model attempt", "url", c.baseURL, "attempt", n, "status", out.status, "err", out.err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w after %d attempts: %w", ErrUnavailable, n, context.Cause(ctx))
		}
		if !out.retryable() || n > c.opts.MaxRetries {
			break
		}
		wait, ok := retryDelay(out.header, n-1, c.opts.MaxRetryDelay)
		if !ok {
			break // the server asked for a longer pause than a retry waits
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%w after %d attempts: %w", ErrUnavailable, n, err)
		}
	}
	lat := time.Since(start)
	if err := out.failure(n); err != nil {
		return nil, err
	}
	resp, err := decodeAnswer(out.body, model)
	out.release()
	if err != nil {
		return nil, err
	}
	resp.LatencyMS = lat.Milliseconds()
	resp.Attempts = n
	return resp, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
