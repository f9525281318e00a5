package sim

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Tokenizer counts tokens with a model server's own tokenizer
// (worldmodel.Client.Tokenize).
type Tokenizer interface {
	Tokenize(ctx context.Context, text string) (worldmodel.TokenCount, error)
}

// CounterOptions tunes ServerCounter. The zero value of each field is a
// usable default.
type CounterOptions struct {
	// Timeout bounds one count; 0 means 10 seconds.
	Timeout time.Duration
	// MaxEntries bounds the remembered counts; when full they are
	// forgotten at once. 0 means 100,000.
	MaxEntries int
	// Logger hears when counting starts failing and when it recovers; nil
	// discards.
	Logger *slog.Logger
}

// ServerCounter returns a TokenCounter backed by tok. Each text is counted
// once (a session's history is counted turn by turn as it grows, so a step
// asks for its new messages only); when the server cannot answer, the count
// falls back to EstimateTokens for that text, is not remembered, and the
// failure is logged once until counting works again. A session resumed while
// the tokenizer is down may cut its history elsewhere than the original did,
// which costs one prefix-cache miss, not correctness.
func ServerCounter(tok Tokenizer, o *CounterOptions) TokenCounter {
	var opts CounterOptions
	if o != nil {
		opts = *o
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MaxEntries == 0 {
		opts.MaxEntries = 100_000
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &serverCounter{tok: tok, opts: opts, log: log, seen: map[string]int{}}
	return c.count
}

type serverCounter struct {
	tok     Tokenizer
	opts    CounterOptions
	log     *slog.Logger
	mu      sync.Mutex
	seen    map[string]int
	failing bool
}

func (c *serverCounter) count(s string) int {
	if s == "" {
		return 0
	}
	c.mu.Lock()
	n, ok := c.seen[s]
	c.mu.Unlock()
	if ok {
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	tc, err := c.tok.Tokenize(ctx, s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if !c.failing {
			c.log.Warn("counting tokens with the model server failed; estimating until it works again", "err", err)
		}
		c.failing = true
		return EstimateTokens(s)
	}
	if c.failing {
		c.log.Info("counting tokens with the model server works again")
		c.failing = false
	}
	if len(c.seen) >= c.opts.MaxEntries {
		clear(c.seen)
	}
	c.seen[s] = tc.Count
	return tc.Count
}
