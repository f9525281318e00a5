package replay

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/agentworld/agentworld/internal/sim"
)

// Key is a SHA-256 digest naming either a history (a chain key) or a
// history followed by an action (an exact key). Chain keys are built one
// turn at a time, so extending a history by a turn hashes only that turn.
type Key [32]byte

// Hash tags keep the three kinds of digest apart, and every string is
// length-prefixed, so no two different inputs frame to the same bytes.
const (
	tagRoot  = 0 // the empty history of a domain
	tagTurn  = 1 // a history extended by one (action, observation) turn
	tagExact = 2 // a history followed by an action
)

// Root is the chain key of the empty history of domain d.
func Root(d string) Key {
	return digest(tagRoot, nil, d, "", false)
}

// Next is the chain key of the history k names extended by one turn.
func (k Key) Next(action, observation string) Key {
	return digest(tagTurn, &k, action, observation, true)
}

// exact is the key under which the answer to action after the history k
// names is indexed.
func (k Key) exact(action string) Key {
	return digest(tagExact, &k, action, "", false)
}

// String is the key in lowercase hex, as cache lines write it.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// ParseKey reads a key written by String.
func ParseKey(s string) (Key, error) {
	var k Key
	if len(s) != 2*len(k) {
		return k, fmt.Errorf("key %q: want %d hex digits, got %d", s, 2*len(k), len(s))
	}
	if _, err := hex.Decode(k[:], []byte(s)); err != nil {
		return k, fmt.Errorf("key %q: %w", s, err)
	}
	return k, nil
}

// framePool recycles the buffers digests are framed in, so a step's
// hashing does not allocate a copy of each observation.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func digest(tag byte, parent *Key, a, b string, withB bool) Key {
	bp := framePool.Get().(*[]byte)
	buf := append((*bp)[:0], tag)
	if parent != nil {
		buf = append(buf, parent[:]...)
	}
	buf = binary.AppendUvarint(buf, uint64(len(a)))
	buf = append(buf, a...)
	if withB {
		buf = binary.AppendUvarint(buf, uint64(len(b)))
		buf = append(buf, b...)
	}
	k := Key(sha256.Sum256(buf))
	if cap(buf) <= 1<<20 { // keep pooled buffers from pinning huge observations
		*bp = buf
		framePool.Put(bp)
	}
	return k
}

// Chain follows the history of one session and keeps the chain key of
// every prefix of it, so that a step whose history grew by one turn hashes
// only that turn. It is safe for concurrent use.
//
// At compares the turns it has already seen with the ones it is given
// rather than trusting the caller: strings sharing memory (as a session's
// history does from step to step) compare in constant time, and a history
// that is not an extension of the last one (a rewind, an edited turn) is
// rehashed from its first differing turn.
type Chain struct {
	mu    sync.Mutex
	keys  []Key      // keys[i] is the chain key of the first i turns
	turns []turnText // the turns keys was built from
}

type turnText struct{ action, observation string }

// NewChain starts the chain of a session in domain d with its history so
// far (empty for a new session; the recorded turns of a resumed or forked
// one, hashed once here).
func NewChain(d string, hist []sim.HistoryTurn) *Chain {
	c := &Chain{keys: []Key{Root(d)}}
	c.At(hist)
	return c
}

// At returns the chain key of hist.
func (c *Chain) At(hist []sim.HistoryTurn) Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(hist), len(c.turns))
	for i := range n {
		if hist[i].Action != c.turns[i].action || hist[i].Observation != c.turns[i].observation {
			n = i
			break
		}
	}
	clear(c.turns[n:]) // drop references to turns no longer followed
	c.keys, c.turns = c.keys[:n+1], c.turns[:n]
	for _, t := range hist[n:] {
		c.keys = append(c.keys, c.keys[len(c.keys)-1].Next(t.Action, t.Observation))
		c.turns = append(c.turns, turnText{t.Action, t.Observation})
	}
	return c.keys[len(hist)]
}
