package worldmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// One HTTP attempt and the retry policy around it, on net/http alone.
//
// This replaced openai-go, which the client used only as a retry loop (the
// body and the answer were already ours, see wire.go): the SDK's code,
// generated for the whole OpenAI API, was about a third of the stripped
// binary. The policy below keeps what the SDK did — retries on connection
// errors, 408, 409, 429 and 5xx; x-should-retry; Retry-After-Ms and
// Retry-After honoured; otherwise 0.5 s doubling up to MaxRetryDelay minus
// up to a quarter of jitter — and adds the response cap.

// maxRetryAfter is the longest server-requested pause a retry waits. A
// server asking for more ends the retries: the caller gets its answer and
// can tell its own client to come back later, rather than holding a step.
const maxRetryAfter = time.Minute

// maxErrorBody is how much of an error answer is read for its message.
const maxErrorBody = 64 << 10

// attempt is the outcome of one POST.
type attempt struct {
	status int // 0 when no response arrived
	header http.Header
	body   []byte
	// pooled, when set, is where body's memory goes back to answerBufs
	// (see release).
	pooled *[]byte
	// err is a transport failure: no response, a body cut off, the attempt
	// timing out, or the answer exceeding the cap.
	err error
}

// retryable reports whether another attempt may succeed where this one
// failed.
func (a *attempt) retryable() bool {
	if a.err != nil {
		return !errors.Is(a.err, ErrResponseTooLarge)
	}
	if a.status < 300 {
		return false // an answer, whatever its headers say
	}
	switch a.header.Get("x-should-retry") {
	case "true":
		return true
	case "false":
		return false
	}
	return retryableStatus(a.status)
}

func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusConflict ||
		code == http.StatusTooManyRequests || code >= 500
}

// failure turns a final attempt that did not succeed into the error a caller
// sees, naming what the server answered; nil for a 2xx answer.
func (a *attempt) failure(attempts int) error {
	switch {
	case errors.Is(a.err, ErrResponseTooLarge):
		return a.err
	case a.err != nil:
		return fmt.Errorf("%w after %d attempts: %w", ErrUnavailable, attempts, a.err)
	case a.status < 300:
		return nil
	case retryableStatus(a.status):
		return fmt.Errorf("%w: HTTP %d after %d attempts: %s", ErrUnavailable, a.status, attempts, errorMessage(a.status, a.body))
	}
	return fmt.Errorf("%w: HTTP %d: %s", ErrRejected, a.status, errorMessage(a.status, a.body))
}

// errorMessage is what an error answer says: the message of an OpenAI-style
// {"error":{"message"}}, vLLM's {"message"} or FastAPI's {"detail"}; else
// the body quoted; else the status text.
func errorMessage(status int, body []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &e) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		switch {
		case len(e.Error) > 0 && json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case firstString(e.Error) != "":
			return firstString(e.Error)
		case e.Message != "":
			return e.Message
		case firstString(e.Detail) != "":
			return firstString(e.Detail)
		}
	}
	if b := bytes.TrimSpace(body); len(b) > 0 {
		return fmt.Sprintf("%.200q", b)
	}
	return strconv.Itoa(status) + " " + http.StatusText(status)
}

// post makes one attempt, bounded by Options.Timeout from sending the
// request to the last byte of the answer, and reads the answer through the
// response cap. use, when not nil, follows net/http's reading of body.
func (c *Client) post(ctx context.Context, body []byte, use *bodyUse) attempt {
	if c.chatErr != nil {
		return attempt{err: c.chatErr}
	}
	actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	timedOut := func(err error, what string) error {
		if ctx.Err() == nil && actx.Err() != nil {
			return fmt.Errorf("attempt timed out after %s %s: %w", c.opts.Timeout, what, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	rctx := actx
	if use != nil {
		rctx = httptrace.WithClientTrace(actx, &use.trace)
	}
	req := c.newPostTo(rctx, c.chatURL, body)
	if use != nil {
		req.GetBody = use.getBody(body)
	}
	res, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return attempt{err: timedOut(err, "waiting for the answer")}
	}
	if use != nil && res.Request != req {
		use.forsaken.Store(true) // redirected: another request was sent
	}
	defer res.Body.Close()
	a := attempt{status: res.StatusCode, header: res.Header}
	if res.StatusCode >= 300 {
		// Only the message is wanted, and the status says what happened
		// even when the body is cut off.
		a.body, _ = io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
		return a
	}
	a.pooled, _ = answerBufs.Get().(*[]byte)
	if a.pooled == nil {
		a.pooled = new([]byte)
	}
	a.body, err = readCapped(res.Body, c.opts.MaxResponseBytes, res.ContentLength, *a.pooled)
	switch {
	case errors.Is(err, ErrResponseTooLarge):
		a.err = err
	case err != nil:
		a.err = timedOut(err, "reading the answer")
	}
	return a
}

// newPost builds a JSON POST with the client's credentials.
func (c *Client) newPost(ctx context.Context, rawURL string, body []byte) (*http.Request, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return c.newPostTo(ctx, u, body), nil
}

// newPostTo is newPost to a URL already parsed, which it copies: the
// request may be changed by whoever sends it, and u is shared. The copy
// goes into the URL the request is made with (from "", which parses
// without a look at any text), so it costs no allocation of its own.
func (c *Client) newPostTo(ctx context.Context, u *url.URL, body []byte) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", bytes.NewReader(body))
	if err != nil {
		panic(err) // unreachable: the method is valid and "" parses
	}
	*req.URL = *u
	req.Host = u.Host
	req.Header = c.header
	if req.Header == nil {
		req.Header = c.newHeader()
	}
	return req
}

// newHeader is the header of a JSON POST with the client's credentials.
func (c *Client) newHeader() http.Header {
	return http.Header{
		"Content-Type":  {"application/json"},
		"Accept":        {"application/json"},
		"Authorization": {"Bearer " + c.opts.APIKey},
	}
}

// parseURL parses a request URL as http.NewRequest does, dropping the ":"
// of a host with an empty port.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if strings.LastIndex(u.Host, ":") > strings.LastIndex(u.Host, "]") {
		u.Host = strings.TrimSuffix(u.Host, ":")
	}
	return u, nil
}

// readCapped reads r to its end into b's memory (growing it as needed),
// failing with ErrResponseTooLarge as soon as more than limit bytes arrive,
// so what it holds stays within about twice the cap (the last growth of
// the slice) whatever the server sends. A declared Content-Length over the
// cap fails before reading anything; one within it sizes the buffer once,
// with a byte to spare for the read that sees the end.
func readCapped(r io.Reader, limit, declared int64, b []byte) ([]byte, error) {
	if declared > limit {
		return nil, tooLarge(limit)
	}
	lr := io.LimitedReader{R: r, N: limit + 1}
	if declared <= 0 {
		// Length unknown (chunked): io.ReadAll grows its buffer with less
		// memory in flight than growing b by appending would, which
		// matters when an answer runs up to the cap.
		b, err := io.ReadAll(&lr)
		if int64(len(b)) > limit {
			return nil, tooLarge(limit)
		}
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	if int64(cap(b)) <= declared {
		b = make([]byte, 0, declared+1)
	}
	b = b[:0]
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, bytes.MinRead)
		}
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			if int64(len(b)) > limit {
				return nil, tooLarge(limit)
			}
			return nil, err
		}
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(limit)
	}
	return b, nil
}

// answerBufs holds the memory of answers already decoded, so that the next
// answer is read into it: decodeAnswer copies out what it keeps.
var answerBufs sync.Pool // of *[]byte

// maxPooledAnswer is the largest answer buffer answerBufs keeps; a rare
// long answer is left to the collector rather than held by the pool.
const maxPooledAnswer = 64 << 10

// release hands the memory of a's body to the next answer; a's body must
// not be used after.
func (a *attempt) release() {
	if a.pooled == nil {
		return
	}
	if cap(a.body) <= maxPooledAnswer {
		*a.pooled = a.body[:0]
		answerBufs.Put(a.pooled)
	}
	a.pooled, a.body = nil, nil
}

func tooLarge(limit int64) error {
	return fmt.Errorf("%w: more than %d bytes (%.1f MiB)", ErrResponseTooLarge, limit, float64(limit)/(1<<20))
}

// retryDelay is the wait before retry number n+1 (n counts from 0): what
// the server asked for in Retry-After-Ms or Retry-After (seconds or an HTTP
// date), else exponential backoff with jitter. ok is false when the server
// asked for longer than maxRetryAfter.
func retryDelay(h http.Header, n int, maxDelay time.Duration) (d time.Duration, ok bool) {
	if d, found := retryAfter(h); found {
		return d, d <= maxRetryAfter
	}
	backoff := 0.5 * float64(time.Second) * math.Pow(2, float64(n))
	d = maxDelay
	if backoff < float64(maxDelay) {
		d = time.Duration(backoff)
	}
	if jitter := int64(d / 4); jitter > 0 {
		d -= time.Duration(rand.Int64N(jitter))
	}
	return d, true
}

// retryAfter reads a server's requested pause; found is false when it asks
// for none (or says something unreadable).
func retryAfter(h http.Header) (d time.Duration, found bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			return durationOf(ms, time.Millisecond), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && !math.IsInf(s, 0) {
		return durationOf(s, time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// durationOf converts v units without overflowing time.Duration.
func durationOf(v float64, unit time.Duration) time.Duration {
	if v*float64(unit) >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(v * float64(unit))
}
