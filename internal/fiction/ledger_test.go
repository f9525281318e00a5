package fiction

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the current output")

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
	path := filepath.Join("testdata", "statetext.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("state text differs from %s (-want +got):\n%s", path, diff)
	}
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
