package worldmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// TokenCount is what a model server's tokenizer says about a text.
type TokenCount struct {
	// Count is the number of tokens of the text alone (no special tokens).
	Count int
	// MaxModelLen is the server's context length, 0 when it does not say.
	MaxModelLen int
}

// ErrNoTokenizer means the server has no /tokenize endpoint (hosted APIs;
// vLLM serves one).
var ErrNoTokenizer = fmt.Errorf("%w: the server has no /tokenize endpoint", ErrRejected)

// Tokenize counts the tokens of text with the server's own tokenizer, through
// POST /tokenize: vLLM serves it at the root beside /v1, SGLang under /v1;
// the first that exists is remembered. Budgets measured this way are exact
// for the served model, where the byte-based estimate can be off by several
// times for non-English text. One attempt, no retries: a caller that cannot
// count falls back to an estimate.
func (c *Client) Tokenize(ctx context.Context, text string) (TokenCount, error) {
	body, err := json.Marshal(tokenizeRequest{Model: c.model, Prompt: text, AddSpecialTokens: false})
	if err != nil {
		return TokenCount{}, err
	}
	urls := tokenizeURLs(c.baseURL)
	if i := c.tokenizeAt.Load(); i > 0 {
		return c.tokenize(ctx, urls[i-1], body)
	}
	for i, url := range urls {
		tc, err := c.tokenize(ctx, url, body)
		if errors.Is(err, ErrNoTokenizer) && i+1 < len(urls) {
			continue
		}
		if err == nil {
			c.tokenizeAt.Store(int32(i + 1))
		}
		return tc, err
	}
	return TokenCount{}, ErrNoTokenizer // unreachable: urls is never empty
}

func (c *Client) tokenize(ctx context.Context, url string, body []byte) (TokenCount, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	req, err := c.newPost(ctx, url, body)
	if err != nil {
		return TokenCount{}, err
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return TokenCount{}, fmt.Errorf("%w: tokenize: %w", ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		switch {
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
			return TokenCount{}, fmt.Errorf("%w (POST %s: %s)", ErrNoTokenizer, url, resp.Status)
		case resp.StatusCode == 429 || resp.StatusCode >= 500:
			return TokenCount{}, fmt.Errorf("%w: tokenize: HTTP %d", ErrUnavailable, resp.StatusCode)
		}
		return TokenCount{}, fmt.Errorf("%w: tokenize: HTTP %d: %s", ErrRejected, resp.StatusCode, bytes.TrimSpace(raw))
	}
	raw, err := readCapped(resp.Body, c.opts.MaxResponseBytes, resp.ContentLength, nil)
	if errors.Is(err, ErrResponseTooLarge) {
		return TokenCount{}, fmt.Errorf("tokenize: %w", err)
	}
	if err != nil {
		return TokenCount{}, fmt.Errorf("%w: tokenize: reading the answer: %w", ErrUnavailable, err)
	}
	return decodeTokenize(raw)
}

// tokenizeURLs are the places a server behind an OpenAI-compatible base URL
// may serve /tokenize: at the root (vLLM), then under the base (SGLang's
// /v1/tokenize).
func tokenizeURLs(base string) []string {
	base = strings.TrimRight(base, "/")
	root := strings.TrimSuffix(base, "/v1")
	if root == base {
		return []string{base + "/tokenize"}
	}
	return []string{root + "/tokenize", base + "/tokenize"}
}
