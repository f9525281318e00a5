package fiction

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentworld/agentworld/internal/trajectory"
)

// Source says where a ledger fact came from.
type Source string

// Fact sources.
const (
	// SourceSpec marks the canon of the spec's facts section.
	SourceSpec Source = "spec"
	// SourceObservation marks a fact read from a simulated observation.
	SourceObservation Source = "observation"
)

// Fact is one ledger entry: at turn Turn of session Session, an observation
// of world World asserted Entity.Attribute = Value.
type Fact struct {
	World     string    `json:"world,omitempty"`
	Entity    string    `json:"entity"`
	Attribute string    `json:"attribute"`
	Value     string    `json:"value"`
	Session   string    `json:"session,omitempty"`
	Turn      int       `json:"turn,omitempty"`
	Source    Source    `json:"source"`
	At        time.Time `json:"at,omitzero"`
}

// Store keeps ledger facts per world, in recording order.
type Store interface {
	// AppendFacts adds facts to a world's ledger durably.
	AppendFacts(ctx context.Context, world string, facts []Fact) error
	// WorldFacts returns a world's facts in the order they were appended.
	WorldFacts(ctx context.Context, world string) ([]Fact, error)
}

// Follower is a Store that other ledgers append to as well (the nodes of
// a cluster, internal/jetstore). A ledger over one reads the facts
// appended since it last looked before each use of a world, and applies
// its own appends only as it reads them back (or, over a
// PositionAppender, as it appends them at the position it read), so
// every ledger over the store applies the same facts in the same order.
type Follower interface {
	Store
	// FactsAfter returns a world's facts appended after position after
	// (0 means all of them), in order, and the position of the last one
	// (after when there are none).
	FactsAfter(ctx context.Context, world string, after uint64) ([]Fact, uint64, error)
}

// PositionAppender is a Follower that appends at an expected position,
// as a compare-and-set: a ledger over one applies its own facts as it
// appends them, without reading them back, since an append accepted at
// the position it read leaves nothing between that position and its own.
type PositionAppender interface {
	Follower
	// AppendFactsAt adds facts to a world's ledger, as AppendFacts does,
	// only if the world's last position is at (0: it has no facts), and
	// returns the position of the facts it added. When another writer
	// has appended after at it adds nothing and fails with
	// ErrPositionMoved.
	AppendFactsAt(ctx context.Context, world string, at uint64, facts []Fact) (uint64, error)
}

// ErrPositionMoved is a PositionAppender's refusal of an append at a
// position that is no longer the world's last.
var ErrPositionMoved = errors.New("another writer appended to the ledger after the expected position")

// MemStore is a Store in memory, for tests and throwaway servers.
type MemStore struct {
	mu sync.Mutex
	m  map[string][]Fact
}

// AppendFacts implements Store.
func (s *MemStore) AppendFacts(_ context.Context, world string, facts []Fact) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]Fact{}
	}
	s.m[world] = append(s.m[world], facts...)
	return nil
}

// WorldFacts implements Store.
func (s *MemStore) WorldFacts(_ context.Context, world string) ([]Fact, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Fact(nil), s.m[world]...), nil
}

// FileStore keeps each world's ledger in DIR/<world>.facts.jsonl, one fact
// per line, appended and synced per batch, so a crash loses at most the
// batch being written (a torn last line is skipped on load, and the next
// append starts on a line of its own). Worlds have separate locks, so one
// world's fsync never holds up another's step.
type FileStore struct {
	dir string
	log *slog.Logger

	mu    sync.Mutex
	files map[string]*sync.Mutex // ledger path → lock of that file
}

// NewFileStore opens (creating) a ledger directory; log may be nil.
func NewFileStore(dir string, log *slog.Logger) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("ledger dir: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FileStore{dir: dir, log: log, files: map[string]*sync.Mutex{}}, nil
}

// Path is the file holding a world's ledger.
func (s *FileStore) Path(world string) string {
	return filepath.Join(s.dir, fileName(world)+".facts.jsonl")
}

// lock takes the lock of a ledger file and returns its unlock.
func (s *FileStore) lock(path string) func() {
	s.mu.Lock()
	m, ok := s.files[path]
	if !ok {
		m = new(sync.Mutex)
		s.files[path] = m
	}
	s.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// fileName keeps [A-Za-z0-9_-] and percent-escapes every other byte of the
// name's UTF-8 encoding, so distinct world names map to distinct files
// inside the directory.
func fileName(world string) string {
	return escapeName([]byte(world))
}

// legacyFileName is how versions before fileName escaped a name: by code
// point, which let "%2E41" stand for both ".41" and U+2E41. It differs from
// fileName only for names with non-ASCII characters.
func legacyFileName(world string) string {
	return escapeName([]rune(world))
}

// escapeName writes units (the name's bytes or its code points) as they are
// when they are [A-Za-z0-9_-], else as %XX; an empty name is "%".
func escapeName[U byte | rune](units []U) string {
	if len(units) == 0 {
		return "%"
	}
	var b strings.Builder
	for _, u := range units {
		switch c := rune(u); {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteRune(c)
		default:
			fmt.Fprintf(&b, "%%%02X", u)
		}
	}
	return b.String()
}

// legacyPath is where versions before fileName kept a world's ledger.
func (s *FileStore) legacyPath(world string) string {
	return filepath.Join(s.dir, legacyFileName(world)+".facts.jsonl")
}

// adopt renames a world's ledger from its legacy file name, once, when only
// that one exists, so upgrading keeps the facts of worlds with non-ASCII
// names. Only writes call it. The caller holds the lock of path.
func (s *FileStore) adopt(world, path string) {
	legacy := s.legacyPath(world)
	if legacy == path {
		return
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err := os.Rename(legacy, path); err == nil {
		s.log.Info("ledger renamed to its new file name", "world", world, "from", legacy, "to", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("ledger under its old file name could not be renamed", "world", world, "path", legacy, "err", err)
	}
}

// AppendFacts implements Store.
func (s *FileStore) AppendFacts(ctx context.Context, world string, facts []Fact) error {
	if len(facts) == 0 {
		return ctx.Err()
	}
	buf := []byte{'\n'} // dropped below unless the file ends in a torn line
	for _, f := range facts {
		b, err := json.Marshal(f)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	path := s.Path(world)
	defer s.lock(path)()
	s.adopt(world, path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("ledger %s: %w", world, err)
	}
	if !endsTorn(f) {
		buf = buf[1:]
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("ledger %s: %w", world, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("ledger %s: %w", world, err)
	}
	return f.Close()
}

// endsTorn reports whether f is non-empty and its last byte is not a
// newline: a crash tore its last line, and an append must not extend it.
func endsTorn(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false
	}
	var last [1]byte
	_, err = f.ReadAt(last[:], st.Size()-1)
	return err == nil && last[0] != '\n'
}

// WorldFacts implements Store. A world without a ledger file has no facts.
// Lines may be of any length; a line that does not decode (a torn last
// line) is logged with its file:line and skipped. A ledger still under its
// legacy file name is read there and left in place: reading never renames
// (a read-only `world check` must not move a file that, by the old
// escaping, may be another world's); the first append adopts it.
func (s *FileStore) WorldFacts(ctx context.Context, world string) ([]Fact, error) {
	path := s.Path(world)
	defer s.lock(path)()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if legacy := s.legacyPath(world); legacy != path {
			path = legacy
			f, err = os.Open(path)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", world, err)
	}
	defer f.Close()
	var out []Fact
	lr := trajectory.NewLineReader(f, path, 0)
	for read := 1; ; read++ {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("ledger %s: %w", world, err)
		}
		if read%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var fact Fact
		if err := json.Unmarshal(line, &fact); err != nil {
			s.log.Warn("ledger: skipping unreadable line", "file", path, "line", n, "err", err)
			continue
		}
		out = append(out, fact)
	}
}

// LedgerOptions tunes a Ledger; nil means defaults.
type LedgerOptions struct {
	// MaxStateChars caps the state text given to a step; zero means 6000.
	// When the ledger outgrows it the most recently updated entities are kept.
	MaxStateChars int
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
	// Now stamps facts; nil means time.Now.
	Now func() time.Time
}

// Ledger is the world ledger: it extracts facts from observations, stores
// the new or changed ones per world, and renders them as state for later
// steps of any session of that world. Safe for concurrent use: each world
// has its own lock, so steps of different worlds never wait on each other.
type Ledger struct {
	store Store
	opts  LedgerOptions

	mu sync.Mutex
	// worlds holds each world's current facts, loaded from the store on
	// first use.
	worlds map[string]*worldState
}

// NewLedger builds a ledger over store.
func NewLedger(store Store, opts *LedgerOptions) *Ledger {
	l := &Ledger{store: store, worlds: map[string]*worldState{}}
	if opts != nil {
		l.opts = *opts
	}
	if l.opts.MaxStateChars == 0 {
		l.opts.MaxStateChars = 6000
	}
	if l.opts.Logger == nil {
		l.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if l.opts.Now == nil {
		l.opts.Now = time.Now
	}
	return l
}

// world returns the world's state, locked; the caller unlocks ws.mu.
func (l *Ledger) world(ctx context.Context, world string) (*worldState, error) {
	l.mu.Lock()
	ws, ok := l.worlds[world]
	if !ok {
		ws = newWorldState(l.opts.MaxStateChars)
		l.worlds[world] = ws
	}
	l.mu.Unlock()
	ws.mu.Lock()
	if f, ok := l.store.(Follower); ok {
		if _, err := ws.follow(ctx, f, world); err != nil {
			ws.mu.Unlock()
			return nil, err
		}
		return ws, nil
	}
	if !ws.loaded {
		facts, err := l.store.WorldFacts(ctx, world)
		if err != nil {
			ws.mu.Unlock()
			return nil, err
		}
		for _, f := range facts {
			ws.apply(f)
		}
		ws.loaded = true
	}
	return ws, nil
}

// Observe extracts the facts of one observation and records those that are
// new or change the current value. It returns what it recorded.
//
// Over a PositionAppender the facts are appended at the position the
// ledger has read, and once that is accepted they are applied as they
// are, without reading them back: nothing can lie between that position
// and them. When another writer appended meanwhile, the append is refused,
// and the ledger appends as over any Follower: unconditionally, then
// reading back, in the store's order, everything appended since it last
// read, the other writers' facts and its own, as every ledger over the
// store applies them. It appends so to that world for as long as its
// read-backs hold other writers' facts (appends at a position would
// mostly be refused there), and at positions again after one holds only
// its own.
func (l *Ledger) Observe(ctx context.Context, world, session string, turn int, observation string) ([]Fact, error) {
	as := Extract(observation)
	if len(as) == 0 {
		return nil, nil
	}
	ws, err := l.world(ctx, world)
	if err != nil {
		return nil, err
	}
	defer ws.mu.Unlock()
	now := l.opts.Now().UTC()
	var add []Fact
	for _, a := range as {
		if cur, ok := ws.value(a.Entity, a.Attribute); ok && cur.Value == a.Value {
			continue
		}
		add = append(add, Fact{World: world, Entity: a.Entity, Attribute: a.Attribute, Value: a.Value,
			Session: session, Turn: turn, Source: SourceObservation, At: now})
	}
	if len(add) == 0 {
		return nil, nil
	}
	if pa, ok := l.store.(PositionAppender); ok && !ws.contended {
		pos, err := pa.AppendFactsAt(ctx, world, ws.pos, add)
		switch {
		case err == nil:
			for _, f := range add {
				ws.apply(f)
			}
			ws.pos = pos
			return add, nil
		case !errors.Is(err, ErrPositionMoved):
			return nil, fmt.Errorf("ledger %s session %s turn %d: %w", world, session, turn, err)
		}
		ws.contended = true
	}
	if err := l.store.AppendFacts(ctx, world, add); err != nil {
		return nil, fmt.Errorf("ledger %s session %s turn %d: %w", world, session, turn, err)
	}
	if f, ok := l.store.(Follower); ok {
		// read back in the store's order, with what others appended
		// meanwhile; on failure the next use of the world reads them
		n, err := ws.follow(ctx, f, world)
		ws.contended = ws.contended && (err != nil || n > len(add))
		return add, nil
	}
	for _, f := range add {
		ws.apply(f)
	}
	return add, nil
}

// follow applies the facts appended to f since ws last read it, with
// ws.mu held, and returns how many it applied.
func (ws *worldState) follow(ctx context.Context, f Follower, world string) (int, error) {
	facts, pos, err := f.FactsAfter(ctx, world, ws.pos)
	if err != nil {
		return 0, err
	}
	for _, fact := range facts {
		ws.apply(fact)
	}
	ws.pos, ws.loaded = pos, true
	return len(facts), nil
}

// StateHeader opens the ledger's state text.
const StateHeader = "World ledger: other sessions of this world have already established these facts. They hold here too: reuse these IDs and values and never contradict them."

// StateText renders the world's current facts for a step of session,
// leaving out facts whose latest assertion came from that session itself
// (its own history already shows them). Empty when there is nothing to say.
//
// When the ledger outgrows MaxStateChars, the most recently updated
// entities that fit are kept, printed in first-seen order so the text
// changes little from step to step. Texts are cached until the world
// changes, and entity lines are rendered once per change of the entity.
func (l *Ledger) StateText(ctx context.Context, world, session string) (string, error) {
	ws, err := l.world(ctx, world)
	if err != nil {
		return "", err
	}
	defer ws.mu.Unlock()
	return ws.text(session), nil
}

// Claim is one assertion in a contradiction.
type Claim struct {
	Value   string `json:"value"`
	Session string `json:"session,omitempty"`
	Turn    int    `json:"turn,omitempty"`
	Source  Source `json:"source"`
}

// Contradiction is a fact that changed a value last asserted by another
// session (or by the spec's facts). Changes within one session are state
// transitions (an agent renaming a file) and are not reported.
type Contradiction struct {
	Entity    string `json:"entity"`
	Attribute string `json:"attribute"`
	// Was is the value in force; Now the conflicting assertion.
	Was Claim `json:"was"`
	Now Claim `json:"now"`
}

func (c Contradiction) String() string {
	return fmt.Sprintf("%s.%s: %q (%s) vs %q (%s)", c.Entity, c.Attribute, c.Was.Value, c.Was.where(), c.Now.Value, c.Now.where())
}

func (c Claim) where() string {
	if c.Source == SourceSpec {
		return "spec facts"
	}
	return fmt.Sprintf("session %s turn %d", c.Session, c.Turn)
}

// Contradictions replays the world's ledger, starting from the canon of
// facts (may be nil), and reports every cross-session change of a value.
func (l *Ledger) Contradictions(ctx context.Context, world string, canon *Facts) ([]Contradiction, error) {
	facts, err := l.store.WorldFacts(ctx, world)
	if err != nil {
		return nil, err
	}
	return FindContradictions(append(canon.Assertions(), facts...)), nil
}

// FindContradictions replays facts in order and reports each fact that
// changes a value whose latest assertion came from a different session or
// from the spec.
func FindContradictions(facts []Fact) []Contradiction {
	latest := map[[2]string]Fact{}
	var out []Contradiction
	for _, f := range facts {
		k := [2]string{f.Entity, f.Attribute}
		cur, ok := latest[k]
		if ok && cur.Value != f.Value && (cur.Source == SourceSpec || f.Source == SourceSpec || cur.Session != f.Session) {
			out = append(out, Contradiction{Entity: f.Entity, Attribute: f.Attribute,
				Was: Claim{Value: cur.Value, Session: cur.Session, Turn: cur.Turn, Source: cur.Source},
				Now: Claim{Value: f.Value, Session: f.Session, Turn: f.Turn, Source: f.Source}})
		}
		latest[k] = f
	}
	return out
}
