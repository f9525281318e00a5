//go:build linux

package realenv

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/mcpclient"
	"github.com/agentworld/agentworld/internal/sandbox"
	"github.com/agentworld/agentworld/internal/testkit"
)

// hostileScreenBound is what the hostile screens may add to the host's
// resident memory over its size with the terminal idle: the bound SECURITY.md
// documents.
const hostileScreenBound = 256 << 20

// screenReport is what TestHelperHostileScreens measured, per attack.
type screenReport struct {
	Attack      string `json:"attack"`
	Observation int    `json:"observation_bytes"`
	Cut         bool   `json:"cut"`
	IdleRSS     int64  `json:"idle_rss_bytes"`
	PeakRSS     int64  `json:"peak_rss_bytes"`
	Allocated   uint64 `json:"allocated_bytes"`
	Seconds     float64
}

// TestHostileScreensStayBounded runs, in a child process of its own (so
// its resident memory is the terminal's alone), a filled 10,000×10,000
// tmux window and a fake tmux server streaming 1 GB, and requires each
// observation to be cut at the cap, saying so, and the child's peak
// resident memory to stay within hostileScreenBound of its idle size.
// Round one's reader held the whole capture (99.9 MB replies, 2.4 GB RSS).
func TestHostileScreensStayBounded(t *testing.T) {
	requireAttackTools(t)
	t.Parallel()
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := testkit.Child("TestHelperHostileScreens", "AGENTWORLD_TEST_SCREENS="+out)
	cmd.Args = append(cmd.Args, "-test.v")
	log := mcpclient.NewTailBuffer(64 << 10)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, log.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("child wrote no report: %v\n%s", err, log.String())
	}
	var reps []screenReport
	if err := json.Unmarshal(b, &reps); err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 {
		t.Fatalf("%d reports, want 2:\n%s", len(reps), log.String())
	}
	for _, r := range reps {
		t.Logf("%s: observation %d bytes (cut %v), idle RSS %d MiB, peak RSS %d MiB (+%d MiB), %d MiB allocated, %.1fs",
			r.Attack, r.Observation, r.Cut, r.IdleRSS>>20, r.PeakRSS>>20, (r.PeakRSS-r.IdleRSS)>>20, r.Allocated>>20, r.Seconds)
		if !r.Cut || r.Observation > DefaultMaxScreenBytes+100 {
			t.Errorf("%s: observation of %d bytes, cut %v", r.Attack, r.Observation, r.Cut)
		}
		if r.PeakRSS-r.IdleRSS > hostileScreenBound {
			t.Errorf("%s: peak RSS %d MiB over the idle %d MiB, bound %d MiB", r.Attack, (r.PeakRSS-r.IdleRSS)>>20, r.IdleRSS>>20, hostileScreenBound>>20)
		}
	}
}

// TestHelperHostileScreens is TestHostileScreensStayBounded's child.
func TestHelperHostileScreens(t *testing.T) {
	out := testkit.ChildEnv(t, "AGENTWORLD_TEST_SCREENS", "TestHostileScreensStayBounded")
	term, _ := attackTerminal(t, &TerminalOptions{StartTimeout: time.Minute})
	ctx := context.Background()
	var reps []screenReport
	measure := func(attack string, prepare string) {
		if prepare != "" {
			agentRun(t, term, prepare)
		}
		runtime.GC()
		idle := procStatus(t, "VmRSS")
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		begin := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		screen, err := term.Screen(cctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", attack, err)
		}
		runtime.ReadMemStats(&ms)
		reps = append(reps, screenReport{
			Attack: attack, Observation: len(screen),
			Cut:     strings.HasSuffix(screen, fmt.Sprintf("[agentworld: the screen was cut at %d bytes]", DefaultMaxScreenBytes)),
			IdleRSS: idle, PeakRSS: procStatus(t, "VmHWM"), Allocated: ms.TotalAlloc - before,
			Seconds: time.Since(begin).Seconds(),
		})
	}
	// 10,000 lines of 9,999 characters into a 10,000×10,000 window: a
	// capture of about 100 MB. agentRun returns once the shell has printed
	// them all.
	measure("filled 10000x10000 window", `tmux -S `+sandbox.TmuxSock+` set -g window-size manual && tmux -S `+sandbox.TmuxSock+` resize-window -x 10000 -y 10000 && python3 -c "import sys; sys.stdout.write(('x' * 9999 + '\n') * 10000)"`)
	measure("fake tmux server streaming 1 GB", takeover("stream", "1073741824"))
	b, _ := json.Marshal(reps)
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// procStatus reads a size field (kB) of /proc/self/status, in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
