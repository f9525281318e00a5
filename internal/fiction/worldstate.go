package fiction

import (
	"sort"
	"strings"
	"sync"
)

// maxCachedSessions bounds how many session-specific state texts a world
// keeps between two changes; sessions past it are rendered on each call.
const maxCachedSessions = 1024

// worldState is one world's current facts, kept ready to render: entities
// in first-seen order and in order of last update, each with its lines
// rendered once per change of the entity. Every field is guarded by mu.
type worldState struct {
	mu       sync.Mutex
	loaded   bool
	pos      uint64 // a Follower store's position of the last fact applied
	maxChars int    // the ledger's MaxStateChars
	// contended: a PositionAppender refused the ledger's last append at
	// its position, and its read-backs since held other writers' facts
	// (Observe).
	contended bool

	entities map[string]*entity
	byRank   []*entity // first-seen order
	recent   *entity   // most recently updated; older ones follow via entity.older
	// owned counts, per session, the current facts it asserted last.
	owned map[string]int

	// shared is the text for every session that asserted none of the
	// current facts (all of them see everything); own holds the texts of
	// sessions that did. Both are dropped by every change.
	shared   string
	sharedOK bool
	own      map[string]string

	render uint64 // number of renders so far; marks the entities one keeps
}

// entity is one entity's current facts.
type entity struct {
	id     string
	attrs  map[string]Fact // latest fact per attribute
	keys   []string        // attribute names, sorted
	owners map[string]int  // session → attributes whose latest fact it asserted
	// lines caches the entity's line per session it leaves out ("": none),
	// until the entity changes; only sessions that own one of its current
	// facts get a line of their own.
	lines        map[string]string
	newer, older *entity
	// kept and shown are scratch of the render in progress: the render that
	// kept the entity and the line it chose for it.
	kept  uint64
	shown string
}

func newWorldState(maxChars int) *worldState {
	return &worldState{maxChars: maxChars, entities: map[string]*entity{}, owned: map[string]int{}, own: map[string]string{}}
}

// value is the current fact of entity.attribute.
func (ws *worldState) value(entity, attribute string) (Fact, bool) {
	e := ws.entities[entity]
	if e == nil {
		return Fact{}, false
	}
	f, ok := e.attrs[attribute]
	return f, ok
}

// apply makes f the current value of its entity.attribute and the entity
// the most recently updated one.
func (ws *worldState) apply(f Fact) {
	e := ws.entities[f.Entity]
	if e == nil {
		e = &entity{id: f.Entity, attrs: map[string]Fact{}, owners: map[string]int{}, lines: map[string]string{}}
		ws.entities[f.Entity] = e
		ws.byRank = append(ws.byRank, e)
	} else {
		ws.unlink(e)
	}
	e.older = ws.recent
	if ws.recent != nil {
		ws.recent.newer = e
	}
	ws.recent = e

	if old, ok := e.attrs[f.Attribute]; ok {
		decrement(e.owners, old.Session)
		decrement(ws.owned, old.Session)
	} else {
		i := sort.SearchStrings(e.keys, f.Attribute)
		e.keys = append(e.keys, "")
		copy(e.keys[i+1:], e.keys[i:])
		e.keys[i] = f.Attribute
	}
	e.attrs[f.Attribute] = f
	e.owners[f.Session]++
	ws.owned[f.Session]++
	clear(e.lines)
	ws.sharedOK = false
	ws.shared = ""
	clear(ws.own)
}

func (ws *worldState) unlink(e *entity) {
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		ws.recent = e.older
	}
	if e.older != nil {
		e.older.newer = e.newer
	}
	e.newer, e.older = nil, nil
}

func decrement(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}

// text is the state text for a step of session, from the cache when the
// world has not changed since it was rendered.
func (ws *worldState) text(session string) string {
	if session == "" || ws.owned[session] == 0 {
		if !ws.sharedOK {
			ws.shared, ws.sharedOK = ws.renderFor(""), true
		}
		return ws.shared
	}
	if t, ok := ws.own[session]; ok {
		return t
	}
	t := ws.renderFor(session)
	if len(ws.own) < maxCachedSessions {
		ws.own[session] = t
	}
	return t
}

// renderFor renders the state text without the facts session asserted
// last ("" leaves out nothing): within the budget, the most recently
// updated entities first, then printed in first-seen order.
func (ws *worldState) renderFor(session string) string {
	ws.render++
	size := len(StateHeader) + 1
	kept := false
	for e := ws.recent; e != nil; e = e.older {
		ln := e.lineFor(session)
		if ln == "" || size+len(ln)+1 > ws.maxChars {
			continue
		}
		size += len(ln) + 1
		e.kept, e.shown = ws.render, ln
		kept = true
	}
	if !kept {
		return ""
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(StateHeader)
	for _, e := range ws.byRank {
		if e.kept == ws.render {
			b.WriteByte('\n')
			b.WriteString(e.shown)
			e.shown = ""
		}
	}
	return b.String()
}

// lineFor is the entity's line without the attributes session asserted
// last, or "" when nothing is left.
func (e *entity) lineFor(session string) string {
	mine := 0
	if session != "" {
		mine = e.owners[session]
	}
	if mine == len(e.keys) {
		return ""
	}
	if mine == 0 {
		session = "" // it leaves out nothing: the shared line
	}
	ln, ok := e.lines[session]
	if !ok {
		ln = e.render(session)
		e.lines[session] = ln
	}
	return ln
}

// render writes "- id — attr: value; …" over the attributes, sorted, whose
// latest fact is not session's.
func (e *entity) render(session string) string {
	var b strings.Builder
	b.WriteString("- " + e.id + " — ")
	first := true
	for _, k := range e.keys {
		f := e.attrs[k]
		if session != "" && f.Session == session {
			continue
		}
		if !first {
			b.WriteString("; ")
		}
		first = false
		b.WriteString(k + ": " + f.Value)
	}
	return b.String()
}
