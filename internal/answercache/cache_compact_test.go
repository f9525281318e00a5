package answercache_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/filelock"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// segLine is one line of a segment as Put writes it.
func segLine(t testing.TB, key, s string) string {
	t.Helper()
	b, err := json.Marshal(answer(s))
	if err != nil {
		t.Fatal(err)
	}
	return `{"k":"` + key + `","r":` + string(b) + "}\n"
}

// writeSegment writes a finished segment (no writer holds it) named to
// sort as the n-th.
func writeSegment(t testing.TB, dir string, n int, content string) string {
	t.Helper()
	name := fmt.Sprintf("seg-%019d-1-%08x.jsonl", 1_700_000_000_000_000_000+n, n)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func dirSize(t *testing.T, dir string, names []string) int64 {
	t.Helper()
	var n int64
	for _, name := range names {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// TestCompactCache: what a compaction keeps, drops and leaves, and that a
// cache opened afterwards answers as one opened before did.
func TestCompactCache(t *testing.T) {
	a, b, c, d, x := hexKey("a"), hexKey("b"), hexKey("c"), hexKey("d"), hexKey("x")
	damaged := `{"k":"` + hexKey("damaged") + `","r":{"content":"cut` + "\x00" + `"}}` + "\n"
	type setup struct {
		// segs are the finished segments' contents, oldest first.
		segs []string
		// live stores these keys through a Cache left open: a run
		// still writing.
		live []string
		// oldEmpty and newEmpty add an empty segment last written an
		// hour ago (a writer killed before its first line) and one just
		// created (a writer about to lock it).
		oldEmpty, newEmpty bool
		// temp adds the temporary file of a killed compaction.
		temp bool
	}
	tests := []struct {
		name  string
		setup func(t *testing.T) setup
		want  answercache.CompactStats
		// segments is how many segments are left; newSeg whether one
		// was written.
		segments int
		newSeg   bool
		serves   map[string]*worldmodel.Response
	}{
		{
			name:     "empty directory",
			setup:    func(t *testing.T) setup { return setup{} },
			segments: 0,
		},
		{
			name: "one clean segment is already compact",
			setup: func(t *testing.T) setup {
				return setup{segs: []string{segLine(t, a, "a") + segLine(t, b, "b")}}
			},
			want:     answercache.CompactStats{Kept: 2},
			segments: 1,
			serves:   map[string]*worldmodel.Response{a: served("a"), b: served("b")},
		},
		{
			name: "duplicates keep the first stored",
			setup: func(t *testing.T) setup {
				return setup{segs: []string{
					segLine(t, a, "a") + segLine(t, b, "b first"),
					segLine(t, b, "b second") + segLine(t, c, "c"),
					segLine(t, a, "a again") + segLine(t, d, "d") + segLine(t, d, "d again"),
				}}
			},
			want:     answercache.CompactStats{Segments: 3, Kept: 4, Duplicates: 3},
			segments: 1, newSeg: true,
			serves: map[string]*worldmodel.Response{a: served("a"), b: served("b first"), c: served("c"), d: served("d")},
		},
		{
			name: "damaged lines and torn tails are dropped",
			setup: func(t *testing.T) setup {
				torn := segLine(t, x, "x")
				return setup{segs: []string{
					segLine(t, a, "a") + damaged + "\n" + segLine(t, b, "b"),
					segLine(t, c, "c") + torn[:len(torn)/2],
				}}
			},
			want:     answercache.CompactStats{Segments: 2, Kept: 3, Corrupt: 1, Torn: 1},
			segments: 1, newSeg: true,
			serves: map[string]*worldmodel.Response{a: served("a"), b: served("b"), c: served("c"), x: nil},
		},
		{
			name: "a damaged line alone makes a single segment worth rewriting",
			setup: func(t *testing.T) setup {
				return setup{segs: []string{segLine(t, a, "a") + damaged}}
			},
			want:     answercache.CompactStats{Segments: 1, Kept: 1, Corrupt: 1},
			segments: 1, newSeg: true,
			serves: map[string]*worldmodel.Response{a: served("a")},
		},
		{
			name: "nothing readable: the segments go, no new one",
			setup: func(t *testing.T) setup {
				return setup{segs: []string{damaged, "\n"}, oldEmpty: true}
			},
			want:     answercache.CompactStats{Segments: 3, Corrupt: 1},
			segments: 0,
		},
		{
			name: "a segment a run still writes is left alone",
			setup: func(t *testing.T) setup {
				return setup{segs: []string{segLine(t, a, "a"), segLine(t, b, "b")}, live: []string{x, a}}
			},
			want:     answercache.CompactStats{Segments: 2, InUse: 1, Kept: 2},
			segments: 2, newSeg: true,
			serves: map[string]*worldmodel.Response{a: served("a"), b: served("b"), x: served(x)},
		},
		{
			name: "an empty segment just created is in use, an old one is gone",
			setup: func(t *testing.T) setup {
				return setup{segs: []string{segLine(t, a, "a"), segLine(t, b, "b")}, oldEmpty: true, newEmpty: true}
			},
			want:     answercache.CompactStats{Segments: 3, InUse: 1, Kept: 2},
			segments: 2, newSeg: true,
			serves: map[string]*worldmodel.Response{a: served("a"), b: served("b")},
		},
		{
			name: "a killed compaction's temporary file is removed",
			setup: func(t *testing.T) setup {
				return setup{segs: []string{segLine(t, a, "a"), segLine(t, b, "b")}, temp: true}
			},
			want:     answercache.CompactStats{Segments: 2, Kept: 2},
			segments: 1, newSeg: true,
			serves: map[string]*worldmodel.Response{a: served("a"), b: served("b")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := tt.setup(t)
			var old []string
			for i, content := range s.segs {
				old = append(old, writeSegment(t, dir, i, content))
			}
			if s.oldEmpty {
				name := writeSegment(t, dir, len(s.segs), "")
				hourAgo := time.Now().Add(-time.Hour)
				if err := os.Chtimes(filepath.Join(dir, name), hourAgo, hourAgo); err != nil {
					t.Fatal(err)
				}
				old = append(old, name)
			}
			if s.newEmpty {
				writeSegment(t, dir, len(s.segs)+1, "")
			}
			temp := filepath.Join(dir, ".seg-1-2-3.jsonl.tmp-123")
			if s.temp {
				if err := os.WriteFile(temp, []byte("half a compacti"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if len(s.live) > 0 {
				w := openCache(t, dir)
				for _, k := range s.live {
					w.Put(k, answer(k))
				}
			}
			before := dirSize(t, dir, old)

			got, err := answercache.CompactCache(context.Background(), dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, *got, cmpopts.IgnoreFields(answercache.CompactStats{}, "Dir", "Segment", "BytesBefore", "BytesAfter", "Elapsed")); d != "" {
				t.Errorf("stats (-want +got):\n%s", d)
			}
			if got.Dir != dir {
				t.Errorf("Dir %q, want %q", got.Dir, dir)
			}
			if (got.Segment != "") != tt.newSeg {
				t.Errorf("new segment %q, want one: %v", got.Segment, tt.newSeg)
			}
			if got.Segment != "" {
				if got.BytesBefore != before {
					t.Errorf("BytesBefore %d, want %d (the old segments' sizes)", got.BytesBefore, before)
				}
				if after := dirSize(t, dir, []string{got.Segment}); got.BytesAfter != after {
					t.Errorf("BytesAfter %d, want %d (the new segment's size)", got.BytesAfter, after)
				}
				for _, name := range old {
					if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("old segment %s still there (%v)", name, err)
					}
				}
			}
			if n := len(segments(t, dir)); n != tt.segments {
				t.Errorf("%d segments left, want %d", n, tt.segments)
			}
			if _, err := os.Stat(temp); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("temporary file still there (%v)", err)
			}
			c := openCache(t, dir)
			wantCache(t, c, tt.serves)
			if c.Corrupt() != 0 {
				t.Errorf("%d damaged lines after compaction", c.Corrupt())
			}
			// A second compaction finds nothing more to do.
			again, err := answercache.CompactCache(context.Background(), dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if again.Segment != "" || again.Duplicates+again.Corrupt != 0 || again.Torn != 0 {
				t.Errorf("second compaction did more: %+v", again)
			}
		})
	}
}

// TestCompactKeepsLegacyLayout: a compaction leaves the one-file-per-answer
// layout of earlier versions in place, and a cache still reads it.
func TestCompactKeepsLegacyLayout(t *testing.T) {
	dir := t.TempDir()
	k := writeLegacy(t, dir, "legacy")
	writeSegment(t, dir, 0, segLine(t, hexKey("a"), "a"))
	writeSegment(t, dir, 1, segLine(t, hexKey("b"), "b"))
	st, err := answercache.CompactCache(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Segments != 2 || st.Kept != 2 {
		t.Fatalf("compacted %d segments keeping %d, want 2 and 2", st.Segments, st.Kept)
	}
	wantCache(t, openCache(t, dir), map[string]*worldmodel.Response{k: served("legacy"), hexKey("a"): served("a"), hexKey("b"): served("b")})
}

// TestCompactOneAtATime: a second compaction while one holds the directory
// is refused at once, naming the lock.
func TestCompactOneAtATime(t *testing.T) {
	dir := t.TempDir()
	lk, err := filelock.Acquire(filepath.Join(dir, answercache.CompactLockName), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Release()
	_, err = answercache.CompactCache(context.Background(), dir, nil)
	if !errors.Is(err, filelock.ErrHeld) || !strings.Contains(err.Error(), answercache.CompactLockName) {
		t.Fatalf("compaction while another runs: %v, want ErrHeld naming %s", err, answercache.CompactLockName)
	}
	// Opening the cache does not wait for it either.
	for i := range 3 {
		writeSegment(t, dir, i, segLine(t, hexKey(fmt.Sprint(i)), "v"))
	}
	c, err := answercache.OpenCache(dir, &answercache.CacheOptions{CompactAt: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := len(segments(t, dir)); n != 3 {
		t.Errorf("%d segments, want the 3 left as they were", n)
	}
}

// TestOpenCacheCompacts: opening a directory of CompactAt segments or more
// compacts it first; below, or with a negative CompactAt, it does not.
func TestOpenCacheCompacts(t *testing.T) {
	for _, tt := range []struct {
		name           string
		segs, at, left int
	}{
		{"below the threshold", 3, 4, 3},
		{"at the threshold", 4, 4, 1},
		{"never", 40, -1, 40},
		{"the default", answercache.DefaultCompactAt, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			want := map[string]*worldmodel.Response{}
			for i := range tt.segs {
				k := hexKey(fmt.Sprint(i))
				writeSegment(t, dir, i, segLine(t, k, fmt.Sprint(i))+segLine(t, hexKey("shared"), "shared"))
				want[k] = served(fmt.Sprint(i))
			}
			want[hexKey("shared")] = served("shared")
			c, err := answercache.OpenCache(dir, &answercache.CacheOptions{CompactAt: tt.at})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if n := len(segments(t, dir)); n != tt.left {
				t.Errorf("%d segments after opening, want %d", n, tt.left)
			}
			wantCache(t, c, want)
		})
	}
}

// TestCacheCompactChild is the other process of TestCompactWhileInUse: run
// after run, it opens the cache, checks every answer stored before (the
// parent's and its own earlier runs'), stores new ones, reads them back and
// closes, until the stop file appears. Each run is a new segment the
// parent compacts while the next run reads it.
func TestCacheCompactChild(t *testing.T) {
	dir := testkit.ChildEnv(t, "AGENTWORLD_CACHE_COMPACT_CHILD", "TestCompactWhileInUse")
	stop := filepath.Join(filepath.Dir(dir), "stop")
	prefilled, err := strconv.Atoi(os.Getenv("AGENTWORLD_CACHE_PREFILLED"))
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	for ; runs < 1000; runs++ {
		if _, err := os.Stat(stop); err == nil {
			break
		}
		// Compacting on open too: the parent and the child race for it.
		c, err := answercache.OpenCache(dir, &answercache.CacheOptions{CompactAt: 3})
		if err != nil {
			t.Fatal(err)
		}
		check := func(k, s string) {
			r, ok := c.Get(k)
			if !ok {
				t.Fatalf("run %d: %s (%.8s…) missing", runs, s, k)
			}
			if d := cmp.Diff(served(s), r); d != "" {
				t.Fatalf("run %d: %s differs (-want +got):\n%s", runs, s, d)
			}
		}
		for i := range prefilled {
			check(hexKey(fmt.Sprint("p", i)), fmt.Sprint("p", i))
		}
		for r := range runs {
			for i := range 20 {
				check(hexKey(fmt.Sprint("c", r, "-", i)), fmt.Sprint("c", r, "-", i))
			}
		}
		for i := range 20 {
			k, s := hexKey(fmt.Sprint("c", runs, "-", i)), fmt.Sprint("c", runs, "-", i)
			c.Put(k, answer(s))
			check(k, s)
		}
		if c.Corrupt() != 0 {
			t.Fatalf("run %d: %d damaged lines", runs, c.Corrupt())
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		// The parent stops the child once it has seen enough runs.
		if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "runs"), []byte(strconv.Itoa(runs+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("runs %d\n", runs)
}

// TestCompactWhileInUse compacts a directory over and over while another
// process opens it, reads every answer and stores new ones: no answer is
// ever missing or torn, in the child or in a cache opened at the end.
func TestCompactWhileInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const prefilled = 300
	for s := range 5 {
		var b strings.Builder
		for i := s * 50; i < s*50+100 && i < prefilled; i++ { // overlapping: duplicates
			b.WriteString(segLine(t, hexKey(fmt.Sprint("p", i)), fmt.Sprint("p", i)))
		}
		writeSegment(t, dir, s, b.String())
	}
	cmd := testkit.Child("TestCacheCompactChild", "AGENTWORLD_CACHE_COMPACT_CHILD="+dir, "AGENTWORLD_CACHE_PREFILLED="+strconv.Itoa(prefilled))
	cmd.Args = append(cmd.Args, "-test.v")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	compactions, held := 0, 0
	// Both processes go on for at least 3 s and until the child has made
	// two runs and this process has compacted twice, however slow a loaded
	// machine makes them (three minutes at most: a hang guard).
	start := time.Now()
	enough := func() bool {
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(dir), "runs"))
		done, _ := strconv.Atoi(string(b))
		el := time.Since(start)
		return el > 3*time.Minute || (el > 3*time.Second && done >= 2 && compactions >= 2)
	}
	stopped := false
	var werr error
loop:
	for {
		select {
		case werr = <-exited:
			break loop
		default:
		}
		if !stopped && enough() {
			if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "stop"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			stopped = true
		}
		st, err := answercache.CompactCache(context.Background(), dir, nil)
		switch {
		case errors.Is(err, filelock.ErrHeld):
			held++
		case err != nil:
			cmd.Process.Kill()
			<-exited
			t.Fatal(err)
		case st.Segment != "":
			compactions++
		}
	}
	if werr != nil {
		t.Fatalf("the child failed (%v):\n%s", werr, out.String())
	}
	runs := 0
	if i := strings.Index(out.String(), "runs "); i >= 0 {
		fmt.Sscanf(out.String()[i:], "runs %d", &runs)
	}
	if runs < 2 {
		t.Fatalf("the child made %d runs:\n%s", runs, out.String())
	}
	t.Logf("the child made %d runs while this process compacted %d times (%d times the child held the lock)", runs, compactions, held)
	if compactions < 2 {
		t.Errorf("only %d compactions rewrote anything while the child ran", compactions)
	}
	if _, err := answercache.CompactCache(context.Background(), dir, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(segments(t, dir)); n != 1 {
		t.Errorf("%d segments after the last compaction, want 1", n)
	}
	want := map[string]*worldmodel.Response{}
	for i := range prefilled {
		want[hexKey(fmt.Sprint("p", i))] = served(fmt.Sprint("p", i))
	}
	for r := range runs {
		for i := range 20 {
			want[hexKey(fmt.Sprint("c", r, "-", i))] = served(fmt.Sprint("c", r, "-", i))
		}
	}
	c := openCache(t, dir)
	wantCache(t, c, want)
	if c.Corrupt() != 0 {
		t.Errorf("%d damaged lines", c.Corrupt())
	}
}

// TestCompactProgress: a compaction of a large cache shows its progress,
// ending with a line of everything read.
func TestCompactProgress(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("p", 110<<10)
	for s := range 4 {
		var b strings.Builder
		for i := range 40 {
			b.WriteString(segLine(t, hexKey(fmt.Sprint(s, "-", i)), big))
		}
		writeSegment(t, dir, s, b.String())
	}
	var out strings.Builder
	st, err := answercache.CompactCache(context.Background(), dir, &answercache.CompactOptions{Progress: &out, ProgressInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if st.BytesBefore < 16<<20 || st.Kept != 160 {
		t.Fatalf("compacted %d bytes, %d answers; the test wants 16 MiB or more and 160", st.BytesBefore, st.Kept)
	}
	if !strings.HasPrefix(out.String(), "cache compact: segment 4/4  17 MiB of 17 MiB read (100%)  160 answers kept  0 duplicates  elapsed ") {
		t.Errorf("progress %q", out.String())
	}
}
