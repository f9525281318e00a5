package answercache

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// refresh picks up what other processes appended since the last look: the
// new tails of known segments (looked at most every refreshEvery), and
// segments created since (listed at most every relistEvery). A refresh
// already under way is not waited for.
func (c *Cache) refresh() {
	now := time.Now().UnixNano()
	if now-c.refreshed.Load() < int64(refreshEvery) || !c.scanMu.TryLock() {
		return
	}
	defer c.scanMu.Unlock()
	c.refreshed.Store(now)
	if time.Since(c.listed) >= relistEvery {
		_ = c.list()
	}
	c.scanAll()
}

// list opens segments not yet known and notes whether the legacy layout
// is present; scanMu is held.
//
// A compaction renames its segment in before it removes the segments it
// replaces, but a listing taken while it runs may see neither (a directory
// read in several calls sees an entry added or removed meanwhile or not),
// or name a segment removed before it is opened. So the directory is read
// until a listing opens every segment it names and names the same segments
// as the one before: the compacted segment was in place before the first
// removal, so the second of two listings after a removal holds it.
func (c *Cache) list() error {
	c.listed = time.Now()
	var prev []string
	for range 8 {
		names, legacy, err := readSegmentNames(c.dir)
		if err != nil {
			return err
		}
		if listHook != nil {
			listHook()
		}
		c.hasLegacy.Store(legacy)
		if !c.open(names) && slices.Equal(names, prev) {
			break
		}
		prev = names
	}
	return nil
}

// readSegmentNames lists dir's segments in name order and reports whether
// it has the legacy layout's directories.
func readSegmentNames(dir string) (names []string, legacy bool, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, false, err
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() && len(name) == 2 && isHex(name) {
			legacy = true
		} else if isSegmentName(name) {
			names = append(names, name)
		}
	}
	return names, legacy, nil
}

// open opens the named segments not yet known and reports whether one was
// gone (removed by a compaction since the listing); scanMu is held.
func (c *Cache) open(names []string) (gone bool) {
	for _, name := range names {
		c.mu.RLock()
		_, known := c.byName[name]
		closed := c.closed
		c.mu.RUnlock()
		if known || closed {
			continue
		}
		f, err := os.Open(filepath.Join(c.dir, name))
		if err != nil {
			// Removed meanwhile (its answers are in the segment that
			// replaced it), or unreadable: its answers are recomputed.
			gone = gone || errors.Is(err, fs.ErrNotExist)
			continue
		}
		c.mu.Lock()
		if c.closed {
			f.Close()
		} else {
			c.byName[name] = len(c.segs)
			c.segs = append(c.segs, &segment{name: name, f: f})
		}
		c.mu.Unlock()
	}
	return gone
}

func isHex(s string) bool {
	for i := range len(s) {
		if b := s[i]; !('0' <= b && b <= '9' || 'a' <= b && b <= 'f') {
			return false
		}
	}
	return true
}

// scanAll indexes the complete lines other processes' segments gained
// since the last scan; scanMu is held.
func (c *Cache) scanAll() {
	c.mu.RLock()
	segs := c.segs[:len(c.segs):len(c.segs)]
	own, closed := c.ownSeg, c.closed
	c.mu.RUnlock()
	if closed {
		return
	}
	for i, s := range segs {
		if i == own {
			continue
		}
		st, err := s.f.Stat()
		if err != nil || st.Size() == s.seen {
			continue
		}
		s.seen = st.Size()
		c.scan(uint32(i), s)
	}
}

// scan reads s from its indexed end to its last complete line. A tail
// without a newline (a writer killed mid-line, or one still writing) is
// left for a later scan; a complete line that does not parse is counted.
// Of a key stored twice in one segment the first line is kept, as of one
// stored in two segments the first segment's.
func (c *Cache) scan(seg uint32, s *segment) {
	found := map[[32]byte]entryLoc{}
	end, _ := eachLine(io.NewSectionReader(s.f, s.scanned, s.seen-s.scanned), s.scanned, func(off int64, line []byte) {
		key, ok := lineKey(line)
		if !ok {
			if len(bytes.TrimSpace(line)) > 0 {
				c.corrupt.Add(1)
			}
			return
		}
		if d := digest(key); !hasKey(found, d) {
			found[d] = entryLoc{off: off, n: uint32(len(line)), seg: seg}
		}
	})
	// A read error stops at the last line read whole; the rest is read
	// again by a later scan.
	s.scanned = end
	if len(found) == 0 {
		return
	}
	c.mu.Lock()
	for d, loc := range found {
		if !hasKey(c.index, d) {
			c.index[d] = loc
		}
	}
	c.mu.Unlock()
}

func hasKey(m map[[32]byte]entryLoc, d [32]byte) bool {
	_, ok := m[d]
	return ok
}

// lineKey is the key of a segment line an index entry can point at: one
// that parses, no longer than an entry's uint32 length.
func lineKey(line []byte) (string, bool) {
	key, _, ok := parseSegmentLine(line)
	return key, ok && int64(len(line)) <= 1<<32-1
}

// eachLine calls fn with each complete line of r (without its newline) and
// its offset, r's first byte lying at off. It returns the offset just past
// the last complete line: what follows is a tail without a newline (torn
// by a kill, or still being written). An error other than the end of r
// stops it.
func eachLine(r io.Reader, off int64, fn func(off int64, line []byte)) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte // a line longer than the reader's buffer
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			continue
		}
		if errors.Is(err, io.EOF) {
			return off, nil
		}
		if err != nil {
			return off, err
		}
		line := chunk
		if long != nil {
			line = append(long, chunk...)
			long = nil
		}
		n := int64(len(line))
		fn(off, line[:len(line)-1])
		off += n
	}
}

// parseSegmentLine splits one segment line (without its newline),
// {"k":"KEY","r":{...}}, into the key and the response's JSON. It checks
// the whole line is valid JSON of that shape, so a line torn or damaged
// anywhere is rejected.
func parseSegmentLine(line []byte) (key string, body []byte, ok bool) {
	const head, mid = `{"k":"`, `","r":`
	rest, found := bytes.CutPrefix(line, []byte(head))
	if !found {
		return "", nil, false
	}
	i := bytes.IndexByte(rest, '"')
	if i < 2 {
		return "", nil, false
	}
	k := rest[:i]
	if !plainKey(string(k)) {
		return "", nil, false
	}
	body, found = bytes.CutPrefix(rest[i:], []byte(mid))
	if !found {
		return "", nil, false
	}
	body, found = bytes.CutSuffix(body, []byte("}"))
	if !found || len(body) == 0 || body[0] != '{' || !json.Valid(body) {
		return "", nil, false
	}
	return string(k), body, true
}
