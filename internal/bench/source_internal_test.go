package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/google/go-cmp/cmp"
)

// refCountLines is the byte-at-a-time definition countLines must keep: a
// line counts when it holds a byte other than ' ', '\t' and '\r'.
func refCountLines(b []byte) int {
	n := 0
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.Trim(l, " \t\r") != "" {
			n++
		}
	}
	return n
}

// TestCountLines compares countLines with the definition on edge cases
// and random texts, read through buffers small enough that lines and runs
// of blanks cross buffer boundaries.
func TestCountLines(t *testing.T) {
	cases := []string{"", "\n", "a", "a\n", "\n\na", " \t\r\n \n", " x \n\r\n{}", "{\"a\":1}\n{\"b\":2}\n", "\u2028\n", "\r", "a\r\nb\r\n"}
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = " \t\r\n{x"
	for range 2000 {
		b := make([]byte, rng.IntN(30))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "x_test.jsonl")
	for i, c := range cases {
		if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		want := refCountLines([]byte(c))
		for _, size := range []int{1, 2, 3, 7, 1 << 10} {
			got, err := countLines(path, make([]byte, size))
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("case %d %q, buffer %d: %d lines, want %d", i, c, size, got, want)
			}
		}
	}
}

// TestReadDataOrder: rows decoded by several workers still reach fn in
// file and line order, with the occurrence of identical rows counted in
// that order, the skipped lines named in that order, and an early stop
// (fn's error, or a bad line without --skip-bad) leaves no goroutine behind.
func TestReadDataOrder(t *testing.T) {
	testkit.NoLeaks(t)
	dir := t.TempDir()
	type want struct {
		file   string
		line   int
		sample string
	}
	var wants []want
	var skipped []string
	seen := map[string]int{}
	for _, name := range []string{"a_test.jsonl", "b_test.jsonl"} {
		var b strings.Builder
		for i := 1; i <= 60; i++ {
			var line string
			switch {
			case i%17 == 0:
				line = "{bad"
				skipped = append(skipped, fmt.Sprintf("%s:%d:", name, i))
			case i%5 == 0: // the same row again
				line = `{"task":"t/mcp","id":5,"prompt":["p"],"response":["r"],"turn_idx":1}`
			default:
				line = fmt.Sprintf(`{"task":"t/mcp","id":%d,"prompt":[%q],"response":["r"],"turn_idx":1}`, i, strings.Repeat("x", i*1000))
			}
			b.WriteString(line + "\n")
			if !strings.HasPrefix(line, "{bad") {
				occ := seen[line]
				seen[line]++
				wants = append(wants, want{name, i, SampleKey([]byte(line), occ)})
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []want
	st, err := ReadData(dir, true, func(it *Item) error {
		got = append(got, want{it.File, it.Line, it.Sample})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wants, got, cmp.AllowUnexported(want{})); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if len(st.SkippedErrors) != len(skipped) {
		t.Fatalf("skipped %q, want %q", st.SkippedErrors, skipped)
	}
	for i, s := range skipped {
		if !strings.Contains(st.SkippedErrors[i], s) {
			t.Errorf("skipped error %d is %q, want one naming %s", i, st.SkippedErrors[i], s)
		}
	}
	stop := errors.New("stop here")
	n := 0
	if _, err := ReadData(dir, true, func(*Item) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) || n != 3 {
		t.Errorf("fn's error: %v after %d rows", err, n)
	}
	n = 0
	if _, err := ReadData(dir, false, func(*Item) error { n++; return nil }); err == nil || !strings.Contains(err.Error(), "a_test.jsonl:17:") || n != 16 {
		t.Errorf("bad line without skip-bad: %v after %d rows", err, n)
	}
}
