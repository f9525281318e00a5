package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/bench"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/sim"
	"github.com/agentworld/agentworld/internal/store"
	"github.com/agentworld/agentworld/internal/ui"
)

// writeBigRun writes a judged run of n samples (each with a prediction
// and judge output of about 1 KB, as a real row's are larger still).
func writeBigRun(tb testing.TB, dir string, n int) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, bench.JudgedFile))
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	doms := []string{"mcp", "search", "terminal", "swe", "android", "web", "os"}
	pad := strings.Repeat("observation text ", 30)
	for i := range n {
		d := doms[i%len(doms)]
		v := 1 + i%5
		j := bench.Judged{Prediction: bench.Prediction{Sample: fmt.Sprintf("s%07d", i), Task: d, Domain: d, ID: fmt.Sprint(i / 20), TurnIdx: 1 + i%20, Model: "m", Prediction: pad},
			Judge: "j", Scores: &score.Scores{Format: v, Factuality: v, Consistency: 5, Realism: 4, Quality: v}, JudgeOutput: pad, Weaknesses: []string{"the listing is wrong"}}
		if err := enc.Encode(j); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkFirstPage100k renders the run page (figures, chart, trust
// report, taxonomy, first page of samples) of a 100,000-sample run whose
// index exists, and reports its time as a ratio to reading the index file
// whole ("page/index-read"; the goal is at most 2).
func BenchmarkFirstPage100k(b *testing.B) {
	root := b.TempDir()
	dir := filepath.Join(root, "big")
	writeBigRun(b, dir, 100_000)
	s, err := ui.New(&ui.Options{Runs: bench.NewViewSource([]string{dir}, nil)})
	if err != nil {
		b.Fatal(err)
	}
	render := func() {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/runs/big", nil))
		if rec.Code != 200 {
			b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
	}
	start := time.Now()
	render() // builds the index
	build := time.Since(start)
	idx := filepath.Join(dir, bench.IndexFile)
	st, err := os.Stat(idx)
	if err != nil {
		b.Fatal(err)
	}
	const reps = 20
	var read, page time.Duration
	for range reps {
		t0 := time.Now()
		if _, err := os.ReadFile(idx); err != nil {
			b.Fatal(err)
		}
		read += time.Since(t0)
		t0 = time.Now()
		render()
		page += time.Since(t0)
	}
	b.ResetTimer()
	for range b.N {
		render()
	}
	b.StopTimer()
	b.ReportMetric(float64(page)/float64(read), "page/index-read")
	b.ReportMetric(float64(st.Size())/1e6, "index-MB")
	b.ReportMetric(build.Seconds(), "index-build-s")
}

// TestTranscriptPageMemoryBounded pages a 10,000-turn session: a page
// allocates a small fraction of what loading the whole transcript does.
func TestTranscriptPageMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 10,000-turn session")
	}
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	obs := strings.Repeat("x", 400)
	turns := make([]sim.TurnRecord, 10_000)
	for i := range turns {
		turns[i] = sim.TurnRecord{Turn: i + 1, HistoryTurn: sim.HistoryTurn{Action: fmt.Sprintf("step %d", i+1), Observation: obs}, Result: sim.StepResult{Observation: obs, Info: sim.StepInfo{Turn: i + 1, Backend: "model"}}}
	}
	if err := db.CreateSession(ctx, sim.SessionRecord{ID: "long", Root: "long", World: "w", Domain: "terminal", Backend: "model", Spec: json.RawMessage(`{}`), Status: sim.StatusActive}, turns); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := store.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	s, err := ui.New(&ui.Options{Sessions: ro})
	if err != nil {
		t.Fatal(err)
	}
	alloc := func(f func()) uint64 {
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	page := alloc(func() {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost/sessions/long?page=150", nil))
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "step 7500<") || !strings.Contains(rec.Body.String(), "step 7451<") || strings.Contains(rec.Body.String(), "step 7450<") || strings.Contains(rec.Body.String(), "step 7501<") {
			t.Fatalf("page 150: %d", rec.Code)
		}
	})
	whole := alloc(func() {
		if _, _, err := ro.LoadSession(ctx, "long"); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("one page allocates %d KB, the whole transcript %d KB", page>>10, whole>>10)
	if page*10 > whole {
		t.Errorf("a page allocates %d bytes, more than a tenth of the whole transcript's %d", page, whole)
	}
}
