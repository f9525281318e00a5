package answercache_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/testkit"
	"github.com/agentworld/agentworld/internal/worldmodel"
)

// hexKey is a key shaped like worldmodel.Request.Hash's.
func hexKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func answer(s string) *worldmodel.Response {
	return &worldmodel.Response{Content: "<predicted_observation>" + s + "\n\"quoted\" \u2028 ünï</predicted_observation>",
		FinishReason: "stop", Model: "wm", PromptTokens: 40, CompletionTokens: 9, LatencyMS: 100, Attempts: 3}
}

// served is what Get returns for a stored answer: the same, with no attempt.
func served(s string) *worldmodel.Response {
	r := answer(s)
	r.Attempts = 0
	return r
}

func openCache(t testing.TB, dir string) *answercache.Cache {
	t.Helper()
	c, err := answercache.OpenCache(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// wantCache checks each key's lookup: a response, or nil for a miss.
func wantCache(t *testing.T, c *answercache.Cache, want map[string]*worldmodel.Response) {
	t.Helper()
	for k, w := range want {
		got, ok := c.Get(k)
		if ok != (w != nil) {
			t.Errorf("Get(%.8s…) found %v, want %v", k, ok, w != nil)
			continue
		}
		if d := cmp.Diff(w, got); d != "" {
			t.Errorf("Get(%.8s…) (-want +got):\n%s", k, d)
		}
	}
}

func segments(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "seg-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

func TestCacheReopen(t *testing.T) {
	dir := t.TempDir()
	a, b, long, odd := hexKey("a"), hexKey("b"), hexKey("long"), "not-a-hash key"
	c := openCache(t, dir)
	if _, ok := c.Get(a); ok {
		t.Fatal("a fresh cache answered")
	}
	if len(segments(t, dir)) != 0 {
		t.Fatal("a cache only read created a segment")
	}
	c.Put(a, answer("a"))
	c.Put(long, answer(strings.Repeat("x", 200<<10))) // longer than the scanner's buffer
	c.Put(odd, answer("odd"))
	c.Put(`bad"key`, answer("bad")) // would need escaping: not stored
	want := map[string]*worldmodel.Response{a: served("a"), b: nil, long: served(strings.Repeat("x", 200<<10)), odd: served("odd"), `bad"key`: nil}
	wantCache(t, c, want)
	if h, m := c.Hits(), c.Misses(); h != 3 || m != 3 {
		t.Errorf("hits %d misses %d, want 3 and 3", h, m)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(a); ok {
		t.Error("a closed cache answered")
	}
	c.Put(b, answer("b")) // dropped, without a panic

	c2 := openCache(t, dir)
	wantCache(t, c2, want)
	if n := len(segments(t, dir)); n != 1 {
		t.Errorf("%d segments, want 1", n)
	}
	if c2.Corrupt() != 0 {
		t.Errorf("%d corrupt lines in a clean cache", c2.Corrupt())
	}
}

// TestCacheShared opens two caches on one directory, as two processes
// sharing --cache do: each sees what the other stores while both are open.
func TestCacheShared(t *testing.T) {
	dir := t.TempDir()
	c1, c2 := openCache(t, dir), openCache(t, dir)
	k1, k2, k3 := hexKey("one"), hexKey("two"), hexKey("three")
	c1.Put(k1, answer("one"))
	eventually(t, c2, k1) // c1's segment is new to c2
	c2.Put(k2, answer("two"))
	eventually(t, c1, k2)
	c1.Put(k3, answer("three")) // a segment c2 already reads grew
	eventually(t, c2, k3)
	c3 := openCache(t, dir)
	wantCache(t, c3, map[string]*worldmodel.Response{k1: served("one"), k2: served("two"), k3: served("three")})
}

// eventually waits for c to find key, which another cache stored: a miss
// looks at known segments' sizes at most every 5 ms and lists new segments
// at most every 50 ms.
func eventually(t *testing.T, c *answercache.Cache, key string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, ok := c.Get(key); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%.8s… stored by another cache never found", key)
		}
	}
}

// TestCacheDamagedSegment: a torn last line (a writer killed mid-write) is
// skipped silently, a damaged line in the middle is skipped and counted,
// and every other entry still answers.
func TestCacheDamagedSegment(t *testing.T) {
	dir := t.TempDir()
	c := openCache(t, dir)
	keys := []string{hexKey("0"), hexKey("1"), hexKey("2")}
	for i, k := range keys {
		c.Put(k, answer(fmt.Sprint(i)))
	}
	c.Close()
	segs := segments(t, dir)
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	torn := hexKey("torn")
	tornLine := `{"k":"` + torn + `","r":{"content":"half an answ`
	damaged := strings.Replace(lines[1], `"content"`, `"cont`+"\x00"+`ent"`, 1)
	if err := os.WriteFile(segs[0], []byte(lines[0]+damaged+lines[2]+"\n"+tornLine), 0o644); err != nil {
		t.Fatal(err)
	}
	c2 := openCache(t, dir)
	wantCache(t, c2, map[string]*worldmodel.Response{keys[0]: served("0"), keys[1]: nil, keys[2]: served("2"), torn: nil})
	if n := c2.Corrupt(); n != 1 {
		t.Errorf("%d corrupt lines counted, want 1 (the damaged one; a torn tail and a blank line are not)", n)
	}
	// What is stored after the damage answers on reopen.
	c2.Put(torn, answer("torn"))
	c2.Close()
	wantCache(t, openCache(t, dir), map[string]*worldmodel.Response{keys[0]: served("0"), torn: served("torn")})
}

// writeLegacy stores answer(s) as earlier versions did, one file per answer
// at <dir>/<2 hex>/<hash>.json, and returns its key.
func writeLegacy(t *testing.T, dir, s string) string {
	t.Helper()
	k := hexKey(s)
	b, err := json.Marshal(answer(s))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, k[:2]), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, k[:2], k+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestCacheLegacyLayout: a cache written by earlier versions, one file per
// answer at <dir>/<2 hex>/<hash>.json, still answers.
func TestCacheLegacyLayout(t *testing.T) {
	dir := t.TempDir()
	k := writeLegacy(t, dir, "legacy")
	c := openCache(t, dir)
	wantCache(t, c, map[string]*worldmodel.Response{k: served("legacy"), hexKey("other"): nil})
	c.Put(hexKey("new"), answer("new"))
	wantCache(t, c, map[string]*worldmodel.Response{k: served("legacy"), hexKey("new"): served("new")})
}

// TestCacheChild is the process TestCacheSurvivesKill9 kills: it stores
// answers as fast as it can until killed.
func TestCacheChild(t *testing.T) {
	dir := testkit.ChildEnv(t, "AGENTWORLD_CACHE_CHILD", "TestCacheSurvivesKill9")
	c, err := answercache.OpenCache(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		c.Put(hexKey(fmt.Sprint(i)), answer(fmt.Sprint(i)+strings.Repeat("y", i%9000)))
	}
}

// TestCacheSurvivesKill9 kills a process storing answers with SIGKILL and
// checks that a cache reopened on its directory answers every answer it
// holds an entry for, correctly, in order, with no line counted corrupt.
func TestCacheSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := t.TempDir()
	cmd := testkit.Child("TestCacheChild", "AGENTWORLD_CACHE_CHILD="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once the child has written a few hundred kilobytes.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
		var size int64
		for _, s := range segments(t, dir) {
			if st, err := os.Stat(s); err == nil {
				size += st.Size()
			}
		}
		if size > 400<<10 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the child stored nothing")
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	c := openCache(t, dir)
	n := 0
	for ; ; n++ {
		r, ok := c.Get(hexKey(fmt.Sprint(n)))
		if !ok {
			break
		}
		if want := served(fmt.Sprint(n) + strings.Repeat("y", n%9000)); !cmp.Equal(r, want) {
			t.Fatalf("answer %d differs after the kill:\n%s", n, cmp.Diff(want, r))
		}
	}
	if n < 10 {
		t.Fatalf("only %d answers survived", n)
	}
	// Answers are stored in order: nothing after the first gap.
	for i := n + 1; i < n+50; i++ {
		if _, ok := c.Get(hexKey(fmt.Sprint(i))); ok {
			t.Fatalf("answer %d found after a gap at %d", i, n)
		}
	}
	if c.Corrupt() != 0 {
		t.Errorf("%d lines counted corrupt after a kill", c.Corrupt())
	}
	t.Logf("%d answers survived the kill", n)
}
