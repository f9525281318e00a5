package fiction

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit"
)

// scenario is a deterministic mix of facts over a few sessions: new
// entities, changed values, values re-asserted by another session, and
// entities whose every attribute belongs to one session.
func scenario(seed uint64, n int) []Fact {
	r := rand.New(rand.NewPCG(seed, 1))
	sessions := []string{"A", "B", "C", "D", ""}
	attrs := []string{"name", "title", "owner", "status", "price", "address.city", "zip"}
	out := make([]Fact, 0, n)
	for i := range n {
		e := fmt.Sprintf("ent-%d", r.IntN(n/5+1))
		if r.IntN(10) == 0 {
			e = fmt.Sprintf("order#%d", r.IntN(40))
		}
		out = append(out, Fact{
			World:     "w",
			Entity:    e,
			Attribute: attrs[r.IntN(len(attrs))],
			Value:     fmt.Sprintf("v%d-%s", r.IntN(6), strings.Repeat("x", r.IntN(12))),
			Session:   sessions[r.IntN(len(sessions))],
			Turn:      i + 1,
			Source:    SourceObservation,
		})
	}
	return out
}

// TestStateTextGolden pins the state text byte for byte: for a fixed
// scenario, loaded partly from the store and partly recorded through
// Observe, the text every session sees under several budgets must equal
// testdata/statetext.golden (written from the renderer this package shipped
// before the per-world cache, so the cache changes nothing users see).
func TestStateTextGolden(t *testing.T) {
	ctx := context.Background()
	facts := scenario(7, 400)
	store := &MemStore{}
	if err := store.AppendFacts(ctx, "w", facts[:200]); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, max := range []int{0, 300, 2000, 100000} {
		l := NewLedger(store, &LedgerOptions{MaxStateChars: max, Now: func() time.Time { return time.Unix(0, 0) }})
		snap := func(step int) {
			for _, s := range []string{"", "A", "B", "C", "D", "nobody"} {
				text, err := l.StateText(ctx, "w", s)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&got, "=== max %d step %d session %q\n%s\n", max, step, s, text)
			}
		}
		snap(0)
		for i, f := range facts[200:] {
			obs := fmt.Sprintf(`{"id":%q,%q:%q}`, f.Entity, f.Attribute, f.Value)
			if _, err := l.Observe(ctx, "w", f.Session, f.Turn, obs); err != nil {
				t.Fatal(err)
			}
			if i%100 == 99 {
				snap(i + 1)
			}
		}
		// The store now holds both halves: reset for the next budget.
		store = &MemStore{}
		if err := store.AppendFacts(ctx, "w", facts[:200]); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Golden(t, filepath.Join("testdata", "statetext.golden"), []byte(got.String()))
}

// benchLedger is a world holding 1,000 facts over ~200 entities written by
// four sessions, as a busy world is after a while.
func benchLedger(b *testing.B) *Ledger {
	store := &MemStore{}
	if err := store.AppendFacts(context.Background(), "w", scenario(3, 1000)); err != nil {
		b.Fatal(err)
	}
	l := NewLedger(store, nil)
	if _, err := l.StateText(context.Background(), "w", "B"); err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkStateText is the ledger's cost per simulator step in a world of
// 1,000 facts: "unchanged" renders for a step when nothing was recorded
// since the last one; "after-change" records one changed fact (as most
// steps of a busy world do) and then renders for another session.
func BenchmarkStateText(b *testing.B) {
	ctx := context.Background()
	b.Run("unchanged", func(b *testing.B) {
		l := benchLedger(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.StateText(ctx, "w", "B"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("after-change", func(b *testing.B) {
		l := benchLedger(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			obs := fmt.Sprintf(`{"id":"ent-%d","status":"s%d"}`, i%200, i)
			if _, err := l.Observe(ctx, "w", "A", i, obs); err != nil {
				b.Fatal(err)
			}
			if _, err := l.StateText(ctx, "w", "B"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// referenceStateText is the renderer as it was before the per-world cache:
// it groups the latest facts by entity on every call. The ledger must
// agree with it on any history.
func referenceStateText(facts []Fact, session string, maxChars int) string {
	latest := map[[2]string]Fact{}
	order, touched := map[string]int{}, map[string]int{}
	for i, f := range facts {
		if _, ok := order[f.Entity]; !ok {
			order[f.Entity] = len(order)
		}
		touched[f.Entity] = i
		latest[[2]string{f.Entity, f.Attribute}] = f
	}
	byEntity := map[string][]Fact{}
	for _, f := range latest {
		if session == "" || f.Session != session {
			byEntity[f.Entity] = append(byEntity[f.Entity], f)
		}
	}
	var entities []string
	for e := range byEntity {
		entities = append(entities, e)
	}
	sort.Slice(entities, func(i, j int) bool { return touched[entities[i]] > touched[entities[j]] })
	lines := map[string]string{}
	var kept []string
	size := len(StateHeader) + 1
	for _, e := range entities {
		fs := byEntity[e]
		sort.Slice(fs, func(i, j int) bool { return fs[i].Attribute < fs[j].Attribute })
		var parts []string
		for _, f := range fs {
			parts = append(parts, f.Attribute+": "+f.Value)
		}
		ln := "- " + e + " — " + strings.Join(parts, "; ")
		if size+len(ln)+1 > maxChars {
			continue
		}
		size += len(ln) + 1
		lines[e] = ln
		kept = append(kept, e)
	}
	if len(kept) == 0 {
		return ""
	}
	sort.Slice(kept, func(i, j int) bool { return order[kept[i]] < order[kept[j]] })
	text := StateHeader
	for _, e := range kept {
		text += "\n" + lines[e]
	}
	return text
}

// TestStateTextMatchesReference replays random histories fact by fact and
// compares, after every fact, the text each session gets (cached or not)
// with the reference renderer.
func TestStateTextMatchesReference(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		seed     uint64
		facts    int
		maxChars int
	}{
		{1, 60, 6000}, {2, 120, 400}, {3, 200, 1200}, {4, 30, 100}, {5, 300, 1 << 20},
	} {
		t.Run(fmt.Sprintf("seed%d-max%d", tc.seed, tc.maxChars), func(t *testing.T) {
			facts := scenario(tc.seed, tc.facts)
			ws := newWorldState(tc.maxChars)
			for i, f := range facts {
				ws.apply(f)
				for _, s := range []string{"", "A", "B", "C", "D", "E"} {
					want := referenceStateText(facts[:i+1], s, tc.maxChars)
					for range 2 { // the second call is served from the cache
						if got := ws.text(s); got != want {
							t.Fatalf("after fact %d, session %q:\n%s", i, s, cmp.Diff(want, got))
						}
					}
				}
			}
			// A ledger loading the same history from its store agrees.
			store := &MemStore{}
			_ = store.AppendFacts(ctx, "w", facts)
			l := NewLedger(store, &LedgerOptions{MaxStateChars: tc.maxChars})
			got, err := l.StateText(ctx, "w", "B")
			if err != nil || got != referenceStateText(facts, "B", tc.maxChars) {
				t.Fatalf("loaded ledger: %v\n%s", err, got)
			}
		})
	}
}

// blockingStore holds AppendFacts of one world until release is closed.
type blockingStore struct {
	MemStore
	world   string
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) AppendFacts(ctx context.Context, world string, facts []Fact) error {
	if world == s.world {
		close(s.entered)
		<-s.release
	}
	return s.MemStore.AppendFacts(ctx, world, facts)
}

// TestWorldsDoNotWaitOnEachOther: while one world's step is stuck writing
// its facts, other worlds observe and render freely.
func TestWorldsDoNotWaitOnEachOther(t *testing.T) {
	ctx := context.Background()
	store := &blockingStore{world: "slow", entered: make(chan struct{}), release: make(chan struct{})}
	l := NewLedger(store, nil)
	done := make(chan error)
	go func() {
		_, err := l.Observe(ctx, "slow", "A", 1, `{"id":"x","v":"1"}`)
		done <- err
	}()
	<-store.entered
	fast := make(chan error)
	go func() {
		if _, err := l.Observe(ctx, "fast", "A", 1, `{"id":"y","v":"2"}`); err != nil {
			fast <- err
			return
		}
		text, err := l.StateText(ctx, "fast", "B")
		if err == nil && !strings.Contains(text, "- y — v: 2") {
			err = fmt.Errorf("state text lacks the fact:\n%s", text)
		}
		fast <- err
	}()
	select {
	case err := <-fast:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // slow is held until released below: a hang guard
		t.Fatal("a step of world fast waited for world slow")
	}
	close(store.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if text, _ := l.StateText(ctx, "slow", "B"); !strings.Contains(text, "- x — v: 1") {
		t.Fatalf("slow world lost its fact:\n%s", text)
	}
}

// TestLedgerConcurrentSteps runs steps of several worlds and sessions at
// once (for -race) and checks the result against the reference.
func TestLedgerConcurrentSteps(t *testing.T) {
	ctx := context.Background()
	store := &MemStore{}
	l := NewLedger(store, &LedgerOptions{MaxStateChars: 800})
	var wg sync.WaitGroup
	for w := range 3 {
		for s := range 4 {
			wg.Go(func() {
				world, session := fmt.Sprintf("w%d", w), fmt.Sprintf("S%d", s)
				for turn := range 40 {
					obs := fmt.Sprintf(`{"id":"e%d","k%d":"%d"}`, turn%7, s, turn)
					if _, err := l.Observe(ctx, world, session, turn, obs); err != nil {
						t.Error(err)
						return
					}
					if _, err := l.StateText(ctx, world, session); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for w := range 3 {
		world := fmt.Sprintf("w%d", w)
		facts, _ := store.WorldFacts(ctx, world)
		for _, s := range []string{"", "S0", "S3"} {
			got, _ := l.StateText(ctx, world, s)
			if want := referenceStateText(facts, s, 800); got != want {
				t.Errorf("%s session %q:\n%s", world, s, cmp.Diff(want, got))
			}
		}
	}
}

// TestFileStoreLongLines: a ledger line far past bufio.Scanner's 64 KiB
// token (here 2 MiB) reads back whole, and an unreadable line is logged
// with its file and line and skipped.
func TestFileStoreLongLines(t *testing.T) {
	ctx := context.Background()
	var logs strings.Builder
	s, err := NewFileStore(t.TempDir(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 1<<20) // 2 MiB of UTF-8
	want := []Fact{
		{Entity: "doc-1", Attribute: "body", Value: long, Source: SourceObservation},
		{Entity: "doc-2", Attribute: "title", Value: "short", Source: SourceObservation},
	}
	if err := s.AppendFacts(ctx, "w", want[:1]); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(s.Path("w"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("{not json}\n")
	f.Close()
	if err := s.AppendFacts(ctx, "w", want[1:]); err != nil {
		t.Fatal(err)
	}
	got, err := s.WorldFacts(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), "file="+s.Path("w")) || !strings.Contains(logs.String(), "line=2") {
		t.Errorf("warning does not name file and line: %s", logs.String())
	}
}

// followStore is a Follower in memory: every fact's position is its index
// in the world's ledger plus one.
type followStore struct{ MemStore }

func (s *followStore) FactsAfter(ctx context.Context, world string, after uint64) ([]Fact, uint64, error) {
	facts, err := s.WorldFacts(ctx, world)
	if err != nil || uint64(len(facts)) <= after {
		return nil, after, err
	}
	return facts[after:], uint64(len(facts)), nil
}

// positionStore is a view of a shared followStore that appends at
// expected positions, as one node's store of a cluster; before, when
// set, runs before its next AppendFactsAt (another node getting in
// first), and calls logs this view's calls: "read", "at" (an append at a
// position, "at refused" when refused), "append".
type positionStore struct {
	*followStore
	before func()
	calls  []string
}

func newPositionStore(shared *followStore) *positionStore { return &positionStore{followStore: shared} }

func (s *positionStore) log(call string) {
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
}

func (s *positionStore) FactsAfter(ctx context.Context, world string, after uint64) ([]Fact, uint64, error) {
	s.log("read")
	return s.followStore.FactsAfter(ctx, world, after)
}

func (s *positionStore) AppendFacts(ctx context.Context, world string, facts []Fact) error {
	s.log("append")
	return s.followStore.AppendFacts(ctx, world, facts)
}

func (s *positionStore) AppendFactsAt(ctx context.Context, world string, at uint64, facts []Fact) (uint64, error) {
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if uint64(len(s.m[world])) != at {
		s.calls = append(s.calls, "at refused")
		return 0, ErrPositionMoved
	}
	s.calls = append(s.calls, "at")
	if s.m == nil {
		s.m = map[string][]Fact{}
	}
	s.m[world] = append(s.m[world], facts...)
	return uint64(len(s.m[world])), nil
}

// TestLedgersShareAFollowerStore: two ledgers over one shared store (two
// nodes of a cluster) see each other's facts at their next use of the
// world, and, after concurrent steps on both, render what one ledger
// holding every fact would; whether the store appends at expected
// positions or not.
func TestLedgersShareAFollowerStore(t *testing.T) {
	t.Run("follower", func(t *testing.T) {
		store := &followStore{}
		testLedgersShare(t, store, store, store)
	})
	t.Run("position appender", func(t *testing.T) {
		store := &followStore{}
		testLedgersShare(t, store, newPositionStore(store), newPositionStore(store))
	})
}

func testLedgersShare(t *testing.T, store, sa, sb Follower) {
	ctx := context.Background()
	a := NewLedger(sa, &LedgerOptions{MaxStateChars: 800})
	b := NewLedger(sb, &LedgerOptions{MaxStateChars: 800})
	if _, err := a.Observe(ctx, "w0", "A", 1, `{"id":"emp-77","title":"Head of Research"}`); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.StateText(ctx, "w0", "B"); !strings.Contains(got, "Head of Research") {
		t.Fatalf("the other ledger's state text lacks the fact: %q", got)
	}
	// B changes it; A's next text has the change
	if rec, _ := b.Observe(ctx, "w0", "B", 1, `{"id":"emp-77","title":"Janitor"}`); len(rec) != 1 {
		t.Fatalf("B recorded %v", rec)
	}
	if got, _ := a.StateText(ctx, "w0", "C"); !strings.Contains(got, "Janitor") || strings.Contains(got, "Head of Research") {
		t.Fatalf("A's state text after B's change: %q", got)
	}
	var wg sync.WaitGroup
	for i, l := range []*Ledger{a, b, a, b} {
		wg.Go(func() {
			for turn := range 30 {
				world, session := fmt.Sprintf("w%d", turn%2), fmt.Sprintf("S%d", i)
				obs := fmt.Sprintf(`{"id":"e%d","k%d":"%d"}`, turn%5, i%2, turn)
				if _, err := l.Observe(ctx, world, session, turn, obs); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, world := range []string{"w0", "w1"} {
		facts, _ := store.WorldFacts(ctx, world)
		for _, s := range []string{"", "S0", "S1", "B"} {
			want := referenceStateText(facts, s, 800)
			for name, l := range map[string]*Ledger{"a": a, "b": b} {
				if got, _ := l.StateText(ctx, world, s); got != want {
					t.Errorf("ledger %s, %s session %q:\n%s", name, world, s, cmp.Diff(want, got))
				}
			}
		}
	}
}

// TestObserveAtPosition: over a PositionAppender, a ledger's step reads
// the world once and appends at the position it read, without reading
// its facts back. When another writer got in first, the append is
// refused, and the step appends as over any Follower, reading back both
// writers' facts in the store's order (so a change of the other
// session's value is a contradiction, as when both append
// unconditionally); its next step, finding only its own facts read back,
// and the one after append at positions again. Both ledgers hold the
// same facts throughout.
func TestObserveAtPosition(t *testing.T) {
	ctx := t.Context()
	const obs = `{"id":"emp-77","title":"Head of Research","floor":"3"}`
	type want struct {
		Recorded       []string // entity.attribute=value Observe returned
		Facts          []string // the world's ledger, in order
		Contradictions int
		Calls          [][]string // ledger a's store calls, per step
	}
	steps := []string{obs, `{"id":"emp-77","title":"CTO"}`, `{"id":"emp-77","title":"CEO"}`}
	for _, tc := range []struct {
		name  string
		other string // what ledger b records just before a's first append; "" nothing
		want  want
	}{
		{name: "nobody else", want: want{
			Recorded: []string{"emp-77.floor=3", "emp-77.title=Head of Research"},
			Facts:    []string{"emp-77.floor=3", "emp-77.title=Head of Research", "emp-77.title=CTO", "emp-77.title=CEO"},
			Calls:    [][]string{{"read", "at"}, {"read", "at"}, {"read", "at"}}}},
		{name: "another session changed a value", other: `{"id":"emp-77","title":"Janitor"}`, want: want{
			Recorded:       []string{"emp-77.floor=3", "emp-77.title=Head of Research"},
			Facts:          []string{"emp-77.title=Janitor", "emp-77.floor=3", "emp-77.title=Head of Research", "emp-77.title=CTO", "emp-77.title=CEO"},
			Contradictions: 1,
			Calls:          [][]string{{"read", "at refused", "append", "read"}, {"read", "append", "read"}, {"read", "at"}}}},
		{name: "another session asserted the same", other: obs, want: want{
			Recorded: []string{"emp-77.floor=3", "emp-77.title=Head of Research"},
			Facts: []string{"emp-77.floor=3", "emp-77.title=Head of Research", "emp-77.floor=3", "emp-77.title=Head of Research",
				"emp-77.title=CTO", "emp-77.title=CEO"},
			Calls: [][]string{{"read", "at refused", "append", "read"}, {"read", "append", "read"}, {"read", "at"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := &followStore{}
			sa, sb := newPositionStore(shared), newPositionStore(shared)
			a, b := NewLedger(sa, nil), NewLedger(sb, nil)
			if tc.other != "" {
				sa.before = func() {
					if _, err := b.Observe(ctx, "w", "B", 1, tc.other); err != nil {
						t.Error(err)
					}
				}
			}
			var got want
			for i, obs := range steps {
				sa.calls = nil
				rec, err := a.Observe(ctx, "w", "A", i+1, obs)
				if err != nil || len(rec) == 0 {
					t.Fatalf("step %d: recorded %v, %v", i+1, rec, err)
				}
				if i == 0 {
					got.Recorded = factStrings(rec)
				}
				got.Calls = append(got.Calls, sa.calls)
				for _, s := range []string{"", "A", "B"} {
					facts, _ := shared.WorldFacts(ctx, "w")
					ta, _ := a.StateText(ctx, "w", s)
					tb, _ := b.StateText(ctx, "w", s)
					if want := referenceStateText(facts, s, 6000); ta != want || tb != want {
						t.Errorf("step %d, session %q: ledger a's text %q, b's %q, want both %q", i+1, s, ta, tb, want)
					}
				}
			}
			facts, _ := shared.WorldFacts(ctx, "w")
			got.Facts, got.Contradictions = factStrings(facts), len(FindContradictions(facts))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
		})
	}
}

func factStrings(facts []Fact) []string {
	var out []string
	for _, f := range facts {
		out = append(out, f.Entity+"."+f.Attribute+"="+f.Value)
	}
	return out
}
