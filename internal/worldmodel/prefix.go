package worldmodel

import (
	"container/list"
	"sync"
)

// DefaultPrefixCacheBytes is the budget of encoded request prefixes a
// Client keeps when Options.PrefixCacheBytes is 0.
const DefaultPrefixCacheBytes = 64 << 20

// prefixCache keeps the encoded prefix of each session's last request,
// keyed by the request context's affinity key (see WithAffinity), so that
// the next step of the session encodes only its new messages. It holds at
// most max bytes, forgetting the sessions least recently asked for first.
type prefixCache struct {
	max int64

	mu    sync.Mutex
	bytes int64
	lru   list.List // of *prefixEntry, most recent at the front
	byKey map[string]*list.Element
}

type prefixEntry struct {
	key string
	p   *encodedPrefix
}

func newPrefixCache(max int64) *prefixCache {
	return &prefixCache{max: max, byKey: map[string]*list.Element{}}
}

// get returns the prefix remembered for key, or nil.
func (c *prefixCache) get(key string) *encodedPrefix {
	if c == nil || key == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*prefixEntry).p
}

// put remembers p as key's prefix. One larger than an eighth of the budget
// is not kept: it would push out many sessions to save one encoding.
func (c *prefixCache) put(key string, p *encodedPrefix) {
	if c == nil || key == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	switch {
	case ok && p.size() <= c.max/8: // the usual step: replace in place
		e := el.Value.(*prefixEntry)
		c.bytes += p.size() - e.p.size()
		e.p = p
		c.lru.MoveToFront(el)
	case ok:
		c.bytes -= el.Value.(*prefixEntry).p.size()
		c.lru.Remove(el)
		delete(c.byKey, key)
		return
	case p.size() > c.max/8:
		return
	default:
		c.byKey[key] = c.lru.PushFront(&prefixEntry{key: key, p: p})
		c.bytes += p.size()
	}
	for c.bytes > c.max {
		old := c.lru.Back()
		e := old.Value.(*prefixEntry)
		c.lru.Remove(old)
		delete(c.byKey, e.key)
		c.bytes -= e.p.size()
	}
}
