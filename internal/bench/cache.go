package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/agentworld/agentworld/internal/atomicfile"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Cache keeps model and judge responses on disk, keyed by the content hash
// of the request (worldmodel.Request.Hash: messages, model and parameters),
// so that re-running with the same settings costs no calls. It is a
// directory of small JSON files, <dir>/<first two hex digits>/<hash>.json,
// each written atomically; any number of processes may share one. Only
// complete answers are stored: truncated generations, failures and judge
// outputs that did not parse never are.
//
// A nil *Cache is valid and caches nothing (--no-cache).
type Cache struct {
	dir          string
	hits, misses atomic.Int64
}

// OpenCache opens (creating if needed) a cache directory.
func OpenCache(dir string) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	return &Cache{dir: dir}, nil
}

// Key is the cache key of a request sent with the given default model, or
// "" for a nil cache: hashing a request serializes every message of a row
// (~185 KB), a cost worth paying only when the answer may be reused. Get
// and Put treat "" as a miss that is not counted and a no-op.
func (c *Cache) Key(req worldmodel.Request, defaultModel string) string {
	if c == nil {
		return ""
	}
	return req.Hash(defaultModel)
}

func (c *Cache) path(key string) string {
	return filepath.Join(c.dir, key[:2], key+".json")
}

// Get returns the cached response for key. A missing or unreadable entry is
// a miss.
func (c *Cache) Get(key string) (*worldmodel.Response, bool) {
	if c == nil || len(key) < 2 {
		return nil, false
	}
	b, err := os.ReadFile(c.path(key))
	if err != nil {
		c.misses.Add(1)
		return nil, false
	}
	var r worldmodel.Response
	if json.Unmarshal(b, &r) != nil {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	// A cached answer cost no attempt in this run.
	r.Attempts = 0
	return &r, true
}

// Put stores a response under key. Errors are ignored: a cache that cannot
// be written only costs calls later.
func (c *Cache) Put(key string, r *worldmodel.Response) {
	if c == nil || len(key) < 2 {
		return
	}
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	// No fsync: a torn entry after a power loss fails to decode and is a
	// miss, and the rename already keeps a killed process from leaving one.
	_ = writeFileAtomic(c.path(key), b, false)
}

// Hits and Misses count lookups since the cache was opened.
func (c *Cache) Hits() int64 {
	if c == nil {
		return 0
	}
	return c.hits.Load()
}

// Misses counts lookups that found nothing.
func (c *Cache) Misses() int64 {
	if c == nil {
		return 0
	}
	return c.misses.Load()
}

// writeFileAtomic creates path's directory and writes b through
// atomicfile; sync false is for entries that can be recomputed.
func writeFileAtomic(path string, b []byte, sync bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, &atomicfile.Options{NoSync: !sync})
}
