package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

func TestEstimateTokens(t *testing.T) {
	cases := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 1},
		{"abcd", 1},
		{"abcde", 2},
		{"ls -la /app\n", 3},
		{"文件已保存", 5},                    // five CJK characters
		{"café", 2},                     // 3 ASCII bytes -> 1, é -> 1
		{"ok 👍", 2},                     // 3 ASCII bytes -> 1, the emoji -> 1
		{string([]byte{0x80, 0x81}), 0}, // stray continuation bytes
	}
	for _, c := range cases {
		if got := EstimateTokens(c.in); got != c.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// wordTokenizer counts whitespace-separated words, like a tokenizer that is
// nothing like bytes/4, and can be made to fail.
type wordTokenizer struct {
	mu    sync.Mutex
	calls map[string]int
	down  bool
}

func (w *wordTokenizer) Tokenize(_ context.Context, s string) (worldmodel.TokenCount, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.calls == nil {
		w.calls = map[string]int{}
	}
	w.calls[s]++
	if w.down {
		return worldmodel.TokenCount{}, errors.New("connection refused")
	}
	return worldmodel.TokenCount{Count: len(strings.Fields(s)), MaxModelLen: 1000}, nil
}

func TestServerCounterCachesAndFallsBack(t *testing.T) {
	tok := &wordTokenizer{}
	count := ServerCounter(tok, &CounterOptions{MaxEntries: 3})
	long := strings.Repeat("x", 400) // one word, 100 estimated tokens
	if got := count(long); got != 1 {
		t.Fatalf("count = %d, want the server's 1", got)
	}
	if got := count(long); got != 1 || tok.calls[long] != 1 {
		t.Fatalf("second count = %d after %d server calls, want 1 from memory", got, tok.calls[long])
	}
	tok.down = true
	other := strings.Repeat("y", 40)
	if got := count(other); got != EstimateTokens(other) {
		t.Fatalf("count while down = %d, want the estimate %d", got, EstimateTokens(other))
	}
	if got := count(long); got != 1 {
		t.Fatalf("remembered count while down = %d, want 1", got)
	}
	tok.down = false
	if got := count(other); got != 1 || tok.calls[other] != 2 {
		t.Fatalf("count after recovery = %d (%d calls), want the server asked again", got, tok.calls[other])
	}
	for _, s := range []string{"a b", "c d e", "f"} { // fills past MaxEntries: memory is cleared
		count(s)
	}
	count(long)
	if tok.calls[long] != 2 {
		t.Fatalf("server asked %d times for a forgotten text, want 2", tok.calls[long])
	}
	if count("") != 0 || tok.calls[""] != 0 {
		t.Fatal("the empty text should cost nothing and ask nothing")
	}
}

// TestBudgetCutsByServerCounts checks that truncation follows the server's
// counts, not the byte estimate: with turns that are long in bytes but few
// in tokens nothing is cut, and with the estimate the same history is cut.
func TestBudgetCutsByServerCounts(t *testing.T) {
	var hist []HistoryTurn
	for i := 0; i < 10; i++ {
		hist = append(hist, HistoryTurn{Message: strings.Repeat("m", 400), Assistant: strings.Repeat("o", 400)})
	}
	server := newBudgetState(Budget{Limit: 500, Count: ServerCounter(&wordTokenizer{}, nil)}, "system prompt")
	server.replay(hist)
	if server.place(1) || server.cut != 0 {
		t.Fatalf("server counts: cut %d, want none (10 turns of ~10 tokens)", server.cut)
	}
	est := newBudgetState(Budget{Limit: 500}, "system prompt")
	est.replay(hist)
	if est.cut == 0 {
		t.Fatal("estimate: no cut, want one (10 turns of 200 estimated tokens)")
	}
}

// TestBudgetCutsWhereTheSumSays: the budget keeps the shown turns' total
// as turns come and cuts go; every cut is where summing the shown turns'
// tokens afresh at each step puts it, live and in a replay of the history.
func TestBudgetCutsWhereTheSumSays(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	b := Budget{Limit: 3000, LowWater: 2000}
	live := newBudgetState(b, "system prompt")
	sys := EstimateTokens("system prompt") + messageOverhead
	var hist []HistoryTurn
	var tokens []int
	cut := 0
	for turn := 1; turn <= 300; turn++ {
		msg := strings.Repeat("m", rng.IntN(2000))
		newTok := EstimateTokens(msg) + messageOverhead
		// The reference: sum the shown turns afresh.
		total := sys + newTok
		for _, t := range tokens[cut:] {
			total += t
		}
		if total > b.Limit {
			for cut < len(tokens) && total > b.LowWater {
				total -= tokens[cut]
				cut++
			}
		}
		live.sync(hist)
		live.place(newTok)
		if live.cut != cut {
			t.Fatalf("turn %d: cut %d, summing afresh gives %d", turn, live.cut, cut)
		}
		h := HistoryTurn{Message: msg, Assistant: strings.Repeat("o", rng.IntN(3000))}
		hist = append(hist, h)
		tokens = append(tokens, EstimateTokens(h.Message)+EstimateTokens(h.Assistant)+2*messageOverhead)
	}
	if cut == 0 {
		t.Fatal("no cut in 300 turns; the test does not exercise the budget")
	}
	replayed := newBudgetState(b, "system prompt")
	replayed.replay(hist)
	if replayed.cut != cut {
		t.Fatalf("replay cut %d, live %d", replayed.cut, cut)
	}
}

// estimateTokensBytewise is EstimateTokens one byte at a time, as it is
// specified.
func estimateTokensBytewise(s string) int {
	ascii, other := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x80:
			ascii++
		case c >= 0xC0:
			other++
		}
	}
	return (ascii+3)/4 + other
}

// FuzzEstimateTokens: EstimateTokens, which reads eight bytes at a time,
// counts every text as reading it byte by byte does.
func FuzzEstimateTokens(f *testing.F) {
	for _, s := range []string{"", "abc", "ls -la /app\n", "文件已保存 and some ASCII after it", "café au lait, twice: café", "\x80\x81\xc0\xff\xfe\x7f\x00 mixed bytes in a long enough run", "👍👍👍👍👍👍"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := EstimateTokens(s), estimateTokensBytewise(s); got != want {
			t.Fatalf("EstimateTokens(%q) = %d, byte by byte %d", s, got, want)
		}
	})
}

// BenchmarkEstimateTokens counts a terminal observation's tokens, eight
// bytes at a time and byte by byte:
//
//	go test ./internal/sim -run '^$' -bench EstimateTokens
func BenchmarkEstimateTokens(b *testing.B) {
	s := strings.Repeat("root@7f3c9e2a1b4d:/app# ls -la\ndrwxr-xr-x 1 root root 4096 Jan  1 00:00 src\n", 8)
	b.Run("words", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			EstimateTokens(s)
		}
	})
	b.Run("bytes", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			estimateTokensBytewise(s)
		}
	})
}
