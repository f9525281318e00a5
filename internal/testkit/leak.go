// Package testkit holds the helpers every package's tests share: one
// goroutine and file-descriptor leak check ([Leaks]), one golden-file
// helper with its -update flag ([Golden]), and one rule for tests that
// need an outside program ([Require]: skip on a developer machine, fail
// under CI=true), and one way to re-execute the test binary as a child
// process that a test can kill ([Child], [ChildEnv]). Its subpackage
// fakellm is the fake OpenAI-compatible model server. The kit is imported
// by tests only; the dependency test of cmd/agentworld keeps it out of the
// binary.
package testkit

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// LeakCheck is a snapshot of the goroutines and open file descriptors of
// the test process, taken by [Leaks].
type LeakCheck struct {
	t          testing.TB
	goroutines int
	fds        int
	// deadline is how long Check waits; 0 means [leakWait].
	deadline time.Duration
}

// Leaks snapshots the goroutine and file-descriptor counts now; [LeakCheck.Check]
// later waits for both to come back to at most that.
func Leaks(t testing.TB) *LeakCheck {
	t.Helper()
	return &LeakCheck{t: t, goroutines: runtime.NumGoroutine(), fds: openFDs()}
}

// Check waits up to a minute for the goroutine count to be at most the
// snapshot's plus slack and the open file descriptors at most the
// snapshot's, and fails the test with every goroutine's stack if they are
// not. Slack allows for goroutines a test may leave by design (an
// httptest server still up); 0 is the strict check.
func (c *LeakCheck) Check(slack int) {
	c.t.Helper()
	c.check(slack, true)
}

// Goroutines is Check without the file-descriptor count, for tests that
// leave files open by design (a listener still serving).
func (c *LeakCheck) Goroutines(slack int) {
	c.t.Helper()
	c.check(slack, false)
}

// NoLeaks checks, when t ends (after its other cleanups), that the
// goroutines it started have ended.
func NoLeaks(t testing.TB) {
	t.Helper()
	c := Leaks(t)
	t.Cleanup(func() { c.Goroutines(0) })
}

func (c *LeakCheck) check(slack int, files bool) {
	c.t.Helper()
	wait := c.deadline
	if wait == 0 {
		wait = leakWait
	}
	deadline := time.Now().Add(wait)
	for {
		g, fds := runtime.NumGoroutine(), openFDs()
		if g <= c.goroutines+slack && (!files || fds <= c.fds) {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			c.t.Fatalf("leak: %d goroutines (%d before, slack %d), %d open files (%d before)\n%s", g, c.goroutines, slack, fds, c.fds, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leakWait is how long a leak check waits for goroutines and files to
// go: connections closing and processes exiting after a test can take
// seconds on a loaded machine, and only a real leak waits it out.
const leakWait = time.Minute

// openFDs counts the process's open file descriptors, or -1 where the
// system does not list them (then only goroutines are checked).
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
