package answercache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// killKey and killAnswer are the answers TestCompactSurvivesKill9 stores.
func killKey(i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint("kill ", i)))
	return hex.EncodeToString(sum[:])
}

func killAnswer(i int) *worldmodel.Response {
	return &worldmodel.Response{Content: fmt.Sprint("answer ", i, " ", strings.Repeat("z", i%5000)), FinishReason: "stop", Model: "wm"}
}

// TestCompactKillChild is the process TestCompactSurvivesKill9 kills: it
// compacts the directory and, at the step it is told, says so by creating
// the marker file and waits to be killed.
func TestCompactKillChild(t *testing.T) {
	dir, step, marker := testkit.ChildEnv(t, "AGENTWORLD_COMPACT_DIR", "TestCompactSurvivesKill9"), os.Getenv("AGENTWORLD_COMPACT_STEP"), os.Getenv("AGENTWORLD_COMPACT_MARKER")
	compactHook = func(s string) {
		if s == step {
			if err := os.WriteFile(marker, nil, 0o644); err != nil {
				panic(err)
			}
			time.Sleep(time.Minute) // killed here
		}
	}
	if _, err := CompactCache(context.Background(), dir, nil); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("compaction ended without reaching step %q", step)
}

// TestCompactSurvivesKill9 kills a compaction with SIGKILL at each of its
// steps (the new segment half written, in place before any old one is
// removed, some old ones removed) and checks that a cache opened afterwards
// answers every answer, that the next compaction completes what the killed
// one began, and that the cache then answers every answer from one
// segment.
func TestCompactSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	const answers, segs = 600, 6
	for _, step := range []string{"written", "renamed", "removed"} {
		t.Run(step, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cache")
			// Each cache is a segment. Two are open at once, and the
			// second stores again half of what the first does, as two
			// runs sharing the directory do.
			per := answers / segs
			for s := 0; s < segs; s += 2 {
				var cs [2]*Cache
				for j := range cs {
					c, err := OpenCache(dir, &CacheOptions{CompactAt: -1})
					if err != nil {
						t.Fatal(err)
					}
					cs[j] = c
				}
				for i := s * per; i < (s+2)*per; i++ {
					if i < (s+1)*per+per/2 {
						cs[0].Put(killKey(i), killAnswer(i))
					}
					if i >= (s+1)*per-per/2 {
						cs[1].Put(killKey(i), killAnswer(i))
					}
				}
				for _, c := range cs {
					if err := c.Close(); err != nil {
						t.Fatal(err)
					}
				}
			}
			check := func(when string) {
				t.Helper()
				c, err := OpenCache(dir, &CacheOptions{CompactAt: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				for i := range answers {
					r, ok := c.Get(killKey(i))
					if !ok {
						t.Fatalf("%s: answer %d missing", when, i)
					}
					if d := cmp.Diff(killAnswer(i), r); d != "" {
						t.Fatalf("%s: answer %d differs (-want +got):\n%s", when, i, d)
					}
				}
				if c.Corrupt() != 0 {
					t.Errorf("%s: %d damaged lines", when, c.Corrupt())
				}
			}

			marker := filepath.Join(t.TempDir(), "reached")
			cmd := testkit.Child("TestCompactKillChild", "AGENTWORLD_COMPACT_DIR="+dir, "AGENTWORLD_COMPACT_STEP="+step, "AGENTWORLD_COMPACT_MARKER="+marker)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
				if _, err := os.Stat(marker); err == nil {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the compaction never reached %q:\n%s", step, out.String())
				}
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			check("after the kill")

			st, err := CompactCache(context.Background(), dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.Kept != answers || st.Duplicates == 0 {
				t.Errorf("the next compaction kept %d answers and dropped %d duplicates, want %d and some", st.Kept, st.Duplicates, answers)
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				if e.Name() != CompactLockName {
					names = append(names, e.Name())
				}
			}
			if len(names) != 1 || !isSegmentName(names[0]) {
				t.Errorf("the directory holds %v after the next compaction, want one segment", names)
			}
			check("after the next compaction")
		})
	}
}

// TestOpenDuringCompaction: a cache opened while a compaction removes the
// segments it has just listed finds their answers in the new segment at
// once (not only at its next listing, up to 50 ms later: a miss meanwhile
// would cost a call).
func TestOpenDuringCompaction(t *testing.T) {
	dir := t.TempDir()
	for s := range 3 {
		c, err := OpenCache(dir, &CacheOptions{CompactAt: -1})
		if err != nil {
			t.Fatal(err)
		}
		c.Put(killKey(s), killAnswer(s))
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	compacted := false
	listHook = func() {
		if compacted {
			return
		}
		compacted = true
		st, err := CompactCache(context.Background(), dir, nil)
		if err != nil || st.Segments != 3 {
			t.Errorf("compaction between listing and opening: %+v, %v", st, err)
		}
	}
	defer func() { listHook = nil }()
	c, err := OpenCache(dir, &CacheOptions{CompactAt: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !compacted {
		t.Fatal("the hook did not run")
	}
	for s := range 3 {
		if r, ok := c.Get(killKey(s)); !ok || !cmp.Equal(r, killAnswer(s)) {
			t.Errorf("answer %d: %+v, %v", s, r, ok)
		}
	}
}

// FuzzCompactSegments: whatever two finished segments hold, a cache opened
// after compacting them serves what one opened before served, for every
// key a line of them names, and counts no damaged line.
func FuzzCompactSegments(f *testing.F) {
	good := `{"k":"` + killKey(1) + `","r":{"content":"one","finish_reason":"stop"}}` + "\n"
	other := `{"k":"` + killKey(2) + `","r":{"content":"two"}}` + "\n"
	f.Add([]byte(good+other), []byte(good))
	f.Add([]byte(good+"{\"k\":\"ab\",\"r\":{}\n"+other), []byte(other[:20]))
	f.Add([]byte("\n\n"+good), []byte(`{"k":"ab","r":{"content":"x"}}`+"\n"+good))
	f.Add([]byte{}, []byte("not json\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		dir := t.TempDir()
		var keys []string
		for i, content := range [][]byte{a, b} {
			name := fmt.Sprintf("seg-%019d-1-00000000.jsonl", 1_700_000_000_000_000_000+i)
			if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(content), "\n") {
				if k, _, ok := parseSegmentLine([]byte(line)); ok {
					keys = append(keys, k)
				}
			}
		}
		serve := func() map[string]*worldmodel.Response {
			c, err := OpenCache(dir, &CacheOptions{CompactAt: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			m := map[string]*worldmodel.Response{}
			for _, k := range keys {
				r, _ := c.Get(k)
				m[k] = r
			}
			return m
		}
		before := serve()
		if _, err := CompactCache(context.Background(), dir, nil); err != nil {
			t.Fatal(err)
		}
		after := serve()
		if d := cmp.Diff(before, after); d != "" {
			t.Fatalf("served before and after compaction differ (-before +after):\n%s", d)
		}
		c, err := OpenCache(dir, &CacheOptions{CompactAt: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.Corrupt() != 0 {
			t.Errorf("%d damaged lines after compaction", c.Corrupt())
		}
	})
}
