// Package tokencount counts the tokens of prompt text: [Estimate], a
// byte rule that needs nothing, and [Server], the model server's own
// tokenizer with a memory of what it counted and the estimate as its
// fallback. The simulator budgets a session's history with either.
package tokencount

import (
	"context"
	"log/slog"
	"math/bits"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Tokenizer counts tokens with a model server's own tokenizer
// (worldmodel.Client.Tokenize).
type Tokenizer interface {
	Tokenize(ctx context.Context, text string) (worldmodel.TokenCount, error)
}

// Options tunes [Server]. The zero value of each field is a
// usable default.
type Options struct {
	// Timeout bounds one count; 0 means 10 seconds.
	Timeout time.Duration
	// MaxEntries bounds the remembered counts; when full they are
	// forgotten at once. 0 means 100,000.
	MaxEntries int
	// Logger hears when counting starts failing and when it recovers; nil
	// discards.
	Logger *slog.Logger
}

// Server returns a counter backed by tok. Each text is counted
// once (a session's history is counted turn by turn as it grows, so a step
// asks for its new messages only); when the server cannot answer, the count
// falls back to [Estimate] for that text, is not remembered, and the
// failure is logged once until counting works again. A session resumed while
// the tokenizer is down may cut its history elsewhere than the original did,
// which costs one prefix-cache miss, not correctness.
func Server(tok Tokenizer, o *Options) func(string) int {
	var opts Options
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
	opts    Options
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
		return Estimate(s)
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

// Estimate is the default count: one token per four ASCII bytes,
// rounded up, plus one per non-ASCII character. Byte-pair tokenizers give
// English prose and code about four and three bytes a token, so the ASCII
// part is close to slightly low; a CJK character is one token or less, where
// a bytes/4 rule would count three bytes as under one token and let a
// Chinese history overflow the context. Exact counts come from the model
// server ([Server]).
func Estimate(s string) int {
	ascii, other := 0, 0
	// Eight bytes at a time: a byte is ASCII when its top bit is clear and
	// starts a multi-byte character when its top two bits are set.
	const tops = 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		b := s[i : i+8]
		w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		ascii += 8 - bits.OnesCount64(w&tops)
		other += bits.OnesCount64(w & (w << 1) & tops)
	}
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x80:
			ascii++
		case c >= 0xC0: // a multi-byte character's first byte
			other++
		}
	}
	return (ascii+3)/4 + other
}
