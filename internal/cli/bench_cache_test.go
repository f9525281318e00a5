package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentworld/agentworld/internal/answercache"
	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/testkit/fakellm"
)

// TestBenchCacheCompact: a damaged line in a shared cache shows in the
// summary and the progress line of the run that reads it; bench cache
// compact (given the run directory or the cache itself) drops it and the
// answers stored twice, says so, and the next run is served every answer
// from the compacted cache.
func TestBenchCacheCompact(t *testing.T) {
	srv := fakellm.New(benchBackend(0))
	defer srv.Close()
	data := t.TempDir()
	writeBenchData(t, data, 14)
	run := func(out, cache string) string {
		t.Helper()
		args := []string{"bench", "run", "--data", data, "--model-url", srv.URL, "--model", "wm",
			"--judge-url", srv.URL, "--judge-model", "judge", "--out", out}
		if cache != "" {
			args = append(args, "--cache", cache)
		}
		_, stderr, err := runBenchCLI(t, args...)
		if err != nil {
			t.Fatalf("bench run: %v\n%s", err, stderr)
		}
		return stderr
	}
	first := t.TempDir()
	run(first, "")
	calls := srv.Count()
	cache := filepath.Join(first, bench.CacheDir)
	segs, err := filepath.Glob(filepath.Join(cache, "seg-*.jsonl"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v, %v; want one", segs, err)
	}
	// A second run stored the same answers (it raced the first), and a
	// line was damaged.
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(string(b), "\n")
	twice := filepath.Join(cache, "seg-9"+strings.TrimPrefix(filepath.Base(segs[0]), "seg-"))
	if err := os.WriteFile(twice, append(b, "{\"k\":\"damaged\n"...), 0o644); err != nil {
		t.Fatal(err)
	}

	stderr := run(t.TempDir(), cache)
	for _, want := range []string{"cache: 28 hits, 0 misses", "cache: 1 damaged lines in " + cache + " skipped", "agentworld bench cache compact " + cache, "cache damaged lines 1"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("bench run's output lacks %q:\n%s", want, stderr)
		}
	}

	stdout, stderr, err := runBenchCLI(t, "bench", "cache", "compact", first)
	if err != nil {
		t.Fatalf("bench cache compact: %v\n%s", err, stderr)
	}
	for _, want := range []string{"cache " + cache + ": 2 segments rewritten into seg-", "answers: 28 kept, 28 duplicates dropped, 1 damaged lines dropped, 0 torn last lines dropped", "size: "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("bench cache compact's output lacks %q:\n%s", want, stdout)
		}
	}
	if lines != 28 {
		t.Errorf("the first run stored %d answers, want 28 (14 predictions, 14 verdicts)", lines)
	}

	stdout, _, err = runBenchCLI(t, "bench", "cache", "compact", cache, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st answercache.CompactStats
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("--json output %q: %v", stdout, err)
	}
	if d := cmp.Diff(answercache.CompactStats{Dir: cache, Kept: 28}, st, cmpopts.IgnoreFields(answercache.CompactStats{}, "Elapsed")); d != "" {
		t.Errorf("second compaction (-want +got):\n%s", d)
	}

	stderr = run(t.TempDir(), cache)
	if srv.Count() != calls || !strings.Contains(stderr, "cache: 28 hits, 0 misses") || strings.Contains(stderr, "damaged") {
		t.Errorf("a run on the compacted cache made %d calls:\n%s", srv.Count()-calls, stderr)
	}

	if _, _, err := runBenchCLI(t, "bench", "cache", "compact", filepath.Join(first, "nothing")); err == nil || !strings.Contains(err.Error(), "nothing") {
		t.Errorf("compacting a missing directory: %v, want an error naming it", err)
	}
}
