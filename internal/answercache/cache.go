// Package answercache keeps world-model and judge answers on disk, keyed
// by the content hash of the request, so that a rerun with the same
// settings costs no calls: append-only segments any number of processes
// share, an in-memory index of digests and places, compaction of segments
// no process writes any more, and the older one-file-per-answer layout
// still read. AgentWorldBench (package bench) and research use it.
package answercache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentworld/agentworld/internal/filelock"
	"github.com/agentworld/agentworld/internal/journal"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// Cache keeps model and judge responses on disk, keyed by the content hash
// of the request (worldmodel.Request.Hash: messages, model and parameters),
// so that re-running with the same settings costs no calls. Only complete
// answers are stored: truncated generations, failures and judge outputs
// that did not parse never are.
//
// On disk it is a directory of append-only segments. Each Cache that stores
// something appends to a segment of its own, seg-<unix ns>-<pid>-<random>.jsonl,
// one line {"k": key, "r": response} per answer written with a single
// write(2) and no fsync (an answer can be recomputed; [Cache.Close] syncs),
// because creating a file per answer cost ~1 ms on the development
// machine's ext4. A process killed mid-write leaves at most a torn last line,
// which readers skip; a corrupt line elsewhere is skipped and counted
// ([Cache.Corrupt]), never fatal.
//
// Any number of processes may share one directory: each writes only its own
// segment, locked while it may still append ([filelock.TryLock]); [OpenCache]
// reads every segment once and indexes it, and a miss picks up what other
// live processes appended since (their new tails only, looked for at most
// every 5 ms; segments created since are listed at most every 50 ms). An
// answer stored twice (two processes asked the same request at once) is
// served from the segment named first, whose names sort by creation time.
//
// Segments accumulate, one per run that stored something; [CompactCache]
// rewrites those no process writes any more into one, and [OpenCache] runs
// it when the directory holds [CacheOptions.CompactAt] segments. The older layout,
// one file per answer at <dir>/<first two hex digits>/<hash>.json, is still
// read: a key the segments lack is looked up there.
//
// Memory: the index holds, per answer, a 32-byte digest of its key and its
// place (segment, offset, length: 16 bytes), about 75 bytes with the map's
// own overhead (73 at 100,000 answers, BenchmarkCacheOpen); answers stay on
// disk and are read back with one pread.
//
// A nil *Cache is valid and caches nothing (--no-cache). All methods are
// safe for concurrent use.
type Cache struct {
	dir          string
	hits, misses atomic.Int64
	corrupt      atomic.Int64
	hasLegacy    atomic.Bool

	mu     sync.RWMutex
	index  map[[32]byte]entryLoc
	segs   []*segment
	byName map[string]int // segment file name → index in segs
	closed bool

	// scanMu serializes reading segments; a miss that finds it held does
	// not wait (the scan under way picks the same tails up).
	scanMu    sync.Mutex
	listed    time.Time    // last listing of the directory
	refreshed atomic.Int64 // unix ns of the last refresh

	// putMu orders this Cache's appends so each one knows its offset.
	putMu   sync.Mutex
	own     *journal.Appender // nil until the first Put
	ownSeg  int               // index of the own segment in segs
	ownSize int64
	ownErr  error
}

// entryLoc is where one answer's line lies.
type entryLoc struct {
	off int64
	n   uint32 // line length without its newline
	seg uint32
}

// segment is one segment file open for reading. scanned is how far its
// complete lines are indexed, seen the size at the last look (a torn tail
// makes them differ and is not read again until the file grows).
type segment struct {
	name          string
	f             *os.File
	scanned, seen int64
}

const (
	segPrefix, segSuffix = "seg-", ".jsonl"
	// relistEvery bounds how often a miss lists the directory for
	// segments created since, refreshEvery how often it looks at the
	// sizes of the segments known (one fstat each: a directory shared by
	// many runs holds many segments, most of them finished).
	relistEvery  = 50 * time.Millisecond
	refreshEvery = 5 * time.Millisecond
)

// DefaultCompactAt is [CacheOptions.CompactAt]'s default: about one
// compaction per that many runs storing answers into a directory, each
// reading and rewriting the whole cache once (what opening it reads anyway).
const DefaultCompactAt = 32

// CacheOptions tunes [OpenCache]. The zero value is the default.
type CacheOptions struct {
	// CompactAt is the number of segments from which opening the cache
	// first compacts it ([CompactCache]; skipped, not waited for, while
	// another process compacts). Zero means [DefaultCompactAt]; negative
	// never compacts.
	CompactAt int
	// Logger receives what opening compacted, or why it could not; nil
	// discards.
	Logger *slog.Logger
}

// OpenCache opens (creating if needed) a cache directory and indexes every
// segment in it, compacting it first when it holds opts.CompactAt segments
// or more. Close it to sync what was stored and release its files. nil opts
// means defaults.
func OpenCache(dir string, opts *CacheOptions) (*Cache, error) {
	var o CacheOptions
	if opts != nil {
		o = *opts
	}
	if o.CompactAt == 0 {
		o.CompactAt = DefaultCompactAt
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	if o.CompactAt > 0 {
		autoCompact(dir, o.CompactAt, log)
	}
	c := &Cache{dir: dir, index: map[[32]byte]entryLoc{}, byName: map[string]int{}, ownSeg: -1}
	c.scanMu.Lock()
	err := c.list()
	if err == nil {
		c.scanAll()
	}
	c.scanMu.Unlock()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	return c, nil
}

// autoCompact compacts dir when it holds at least at segments. A failure
// only leaves the cache as it was (it is logged): opening goes on.
func autoCompact(dir string, at int, log *slog.Logger) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return // OpenCache's own listing reports it
	}
	n := 0
	for _, e := range ents {
		if isSegmentName(e.Name()) {
			n++
		}
	}
	if n < at {
		return
	}
	st, err := CompactCache(context.Background(), dir, &CompactOptions{Logger: log})
	switch {
	case errors.Is(err, filelock.ErrHeld):
		log.Debug("cache: another process is compacting; not waited for", "dir", dir)
	case err != nil:
		log.Warn("cache: compaction failed; the cache is read as it is", "dir", dir, "err", err)
	default:
		log.Info("cache: compacted", "dir", dir, "segments", st.Segments, "in_use", st.InUse,
			"answers", st.Kept, "duplicates", st.Duplicates, "corrupt", st.Corrupt,
			"bytes_before", st.BytesBefore, "bytes_after", st.BytesAfter)
	}
}

// Dir is the cache's directory ("" for a nil cache).
func (c *Cache) Dir() string {
	if c == nil {
		return ""
	}
	return c.dir
}

// Close syncs and closes this Cache's segment and the segments it reads,
// returning the first error appending to, syncing or closing its own.
// Later lookups miss and stores are dropped. A nil cache returns nil.
func (c *Cache) Close() error {
	if c == nil {
		return nil
	}
	c.putMu.Lock()
	defer c.putMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var err error
	if c.own != nil {
		err = c.own.Close() // carries the first append error too
	}
	for _, s := range c.segs {
		s.f.Close()
	}
	return err
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

// digest is the index key of key: the hash itself when key is one (64 hex
// digits), else its SHA-256. Get compares the stored key, so a digest
// collision is a miss, not a wrong answer.
func digest(key string) [32]byte {
	var d [32]byte
	if len(key) == 64 {
		if n, err := hex.Decode(d[:], []byte(key)); err == nil && n == 32 {
			return d
		}
	}
	return sha256.Sum256([]byte(key))
}

// Get returns the cached response for key. A missing or unreadable entry is
// a miss.
func (c *Cache) Get(key string) (*worldmodel.Response, bool) {
	if c == nil || len(key) < 2 {
		return nil, false
	}
	d := digest(key)
	r, ok := c.lookup(d, key)
	if !ok {
		c.refresh()
		r, ok = c.lookup(d, key)
	}
	if !ok && c.hasLegacy.Load() {
		r, ok = c.legacy(key)
	}
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	// A cached answer cost no attempt in this run.
	r.Attempts = 0
	return r, true
}

// lookup reads key's entry from the segments, if indexed.
func (c *Cache) lookup(d [32]byte, key string) (*worldmodel.Response, bool) {
	c.mu.RLock()
	loc, ok := c.index[d]
	var f *os.File
	if ok && !c.closed {
		f = c.segs[loc.seg].f
	}
	c.mu.RUnlock()
	if f == nil {
		return nil, false
	}
	line := make([]byte, loc.n)
	if _, err := f.ReadAt(line, loc.off); err != nil {
		return nil, false
	}
	k, body, ok := parseSegmentLine(line)
	if !ok || k != key {
		return nil, false
	}
	var r worldmodel.Response
	if json.Unmarshal(body, &r) != nil {
		return nil, false
	}
	return &r, true
}

// legacy reads key from the one-file-per-answer layout.
func (c *Cache) legacy(key string) (*worldmodel.Response, bool) {
	b, err := os.ReadFile(filepath.Join(c.dir, key[:2], key+".json"))
	if err != nil {
		return nil, false
	}
	var r worldmodel.Response
	if json.Unmarshal(b, &r) != nil {
		return nil, false
	}
	return &r, true
}

// Completer answers from the cache what it holds and stores the complete
// answers of c (not cut by the token budget, not empty), as bench's model
// and judge stages do, so callers outside bench (research's optimizer and
// real check) rerun for free. defaultModel is the model a request without
// one is sent to, part of the key. A nil cache returns c.
func (c *Cache) Completer(cl worldmodel.Completer, defaultModel string) worldmodel.Completer {
	if c == nil {
		return cl
	}
	return cachedCompleter{cl, c, defaultModel}
}

type cachedCompleter struct {
	c     worldmodel.Completer
	cache *Cache
	model string
}

func (cc cachedCompleter) Complete(ctx context.Context, req worldmodel.Request) (*worldmodel.Response, error) {
	key := cc.cache.Key(req, cc.model)
	if resp, ok := cc.cache.Get(key); ok {
		return resp, nil
	}
	resp, err := cc.c.Complete(ctx, req)
	if err == nil && !resp.Truncated() && resp.Content != "" {
		cc.cache.Put(key, resp)
	}
	return resp, err
}

// Put stores a response under key. Errors are ignored: a cache that cannot
// be written only costs calls later. A key already stored, or one that JSON
// would have to escape (keys are hex hashes), is not written.
func (c *Cache) Put(key string, r *worldmodel.Response) {
	if c == nil || len(key) < 2 || !plainKey(key) {
		return
	}
	d := digest(key)
	c.mu.RLock()
	_, have := c.index[d]
	c.mu.RUnlock()
	if have {
		return
	}
	body, err := json.Marshal(r)
	if err != nil {
		return
	}
	line := make([]byte, 0, len(key)+len(body)+16)
	line = append(append(append(line, `{"k":"`...), key...), `","r":`...)
	line = append(append(line, body...), "}\n"...)

	c.putMu.Lock()
	defer c.putMu.Unlock()
	if c.own == nil && !c.openOwn() {
		return
	}
	off := c.ownSize
	if c.ownErr = c.own.AppendLines(line); c.ownErr != nil {
		return
	}
	c.ownSize += int64(len(line))
	c.mu.Lock()
	if !c.closed {
		c.index[d] = entryLoc{off: off, n: uint32(len(line) - 1), seg: uint32(c.ownSeg)}
	}
	c.mu.Unlock()
}

// openOwn creates this Cache's segment on its first Put (a cache only read
// leaves no file behind). It reports whether Put may append; putMu is held.
func (c *Cache) openOwn() bool {
	if c.ownErr != nil {
		return false
	}
	c.mu.RLock()
	closed := c.closed
	c.mu.RUnlock()
	if closed {
		return false
	}
	name := newSegmentName()
	path := filepath.Join(c.dir, name)
	// The segment is locked before its first line and until Close: a
	// compaction takes a segment with lines that nobody locks for one whose
	// writer is gone, and one left empty for a while for a writer killed
	// before it locked (emptyGrace); it never locks an empty one younger
	// than that, so the lock is free here. A system without file locks
	// only cannot compact.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		c.ownErr = err
		return false
	}
	if held, _ := filelock.TryLock(f); held {
		f.Close()
		os.Remove(path)
		c.ownErr = fmt.Errorf("cache %s: segment %s locked by another process as it was created", c.dir, name)
		return false
	}
	a, err := journal.Open(path, 0)
	if err != nil {
		f.Close()
		os.Remove(path)
		c.ownErr = err
		return false
	}
	c.mu.Lock()
	c.own = a
	c.ownSeg = len(c.segs)
	c.byName[name] = c.ownSeg
	c.segs = append(c.segs, &segment{name: name, f: f})
	c.mu.Unlock()
	return true
}

// newSegmentName names a new segment: by creation time first, so that
// sorting names orders segments by age, then what keeps two writers apart.
func newSegmentName() string {
	return fmt.Sprintf("%s%d-%d-%08x%s", segPrefix, time.Now().UnixNano(), os.Getpid(), rand.Uint32(), segSuffix)
}

func isSegmentName(name string) bool {
	return strings.HasPrefix(name, segPrefix) && strings.HasSuffix(name, segSuffix)
}

// plainKey reports whether key is written into a line as is: printable
// ASCII without quotes or backslashes.
func plainKey(key string) bool {
	for i := range len(key) {
		if b := key[i]; b < 0x20 || b > 0x7e || b == '"' || b == '\\' {
			return false
		}
	}
	return true
}

// listHook, when set (by tests only), runs between reading the directory
// and opening what it names.
var listHook func()

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

// Corrupt counts complete segment lines that did not parse and were
// skipped (a torn last line is not counted: it is the expected trace of a
// process killed mid-write).
func (c *Cache) Corrupt() int64 {
	if c == nil {
		return 0
	}
	return c.corrupt.Load()
}
