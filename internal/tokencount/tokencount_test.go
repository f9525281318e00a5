package tokencount

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/agentworld/agentworld/internal/worldmodel"
)

func TestEstimate(t *testing.T) {
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
		if got := Estimate(c.in); got != c.want {
			t.Errorf("Estimate(%q) = %d, want %d", c.in, got, c.want)
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

func TestServerCachesAndFallsBack(t *testing.T) {
	tok := &wordTokenizer{}
	count := Server(tok, &Options{MaxEntries: 3})
	long := strings.Repeat("x", 400) // one word, 100 estimated tokens
	if got := count(long); got != 1 {
		t.Fatalf("count = %d, want the server's 1", got)
	}
	if got := count(long); got != 1 || tok.calls[long] != 1 {
		t.Fatalf("second count = %d after %d server calls, want 1 from memory", got, tok.calls[long])
	}
	tok.down = true
	other := strings.Repeat("y", 40)
	if got := count(other); got != Estimate(other) {
		t.Fatalf("count while down = %d, want the estimate %d", got, Estimate(other))
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

// estimateBytewise is Estimate one byte at a time, as it is
// specified.
func estimateBytewise(s string) int {
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

// FuzzEstimate: Estimate, which reads eight bytes at a time,
// counts every text as reading it byte by byte does.
func FuzzEstimate(f *testing.F) {
	for _, s := range []string{"", "abc", "ls -la /app\n", "文件已保存 and some ASCII after it", "café au lait, twice: café", "\x80\x81\xc0\xff\xfe\x7f\x00 mixed bytes in a long enough run", "👍👍👍👍👍👍"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Estimate(s), estimateBytewise(s); got != want {
			t.Fatalf("Estimate(%q) = %d, byte by byte %d", s, got, want)
		}
	})
}

// BenchmarkEstimate counts a terminal observation's tokens, eight
// bytes at a time and byte by byte:
//
//	go test ./internal/sim -run '^$' -bench Estimate
func BenchmarkEstimate(b *testing.B) {
	s := strings.Repeat("root@7f3c9e2a1b4d:/app# ls -la\ndrwxr-xr-x 1 root root 4096 Jan  1 00:00 src\n", 8)
	b.Run("words", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			Estimate(s)
		}
	})
	b.Run("bytes", func(b *testing.B) {
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			estimateBytewise(s)
		}
	})
}
