package reward

import "sync"

// answerCache keeps judge answers by content key, evicting the oldest
// entry once full (a reward server sees each rollout once or a few times
// in close succession, so recency is what matters).
type answerCache struct {
	mu    sync.Mutex
	max   int
	m     map[string]string
	order []string
	next  int
}

func newAnswerCache(max int) *answerCache {
	if max < 0 {
		return nil
	}
	return &answerCache{max: max, m: make(map[string]string)}
}

func (c *answerCache) get(key string) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *answerCache) put(key, content string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		c.m[key] = content
		return
	}
	if len(c.order) < c.max {
		c.order = append(c.order, key)
	} else {
		delete(c.m, c.order[c.next])
		c.order[c.next] = key
		c.next = (c.next + 1) % c.max
	}
	c.m[key] = content
}
