package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

func TestGoldenMatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.golden")
	if err := os.WriteFile(path, []byte("same\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Golden(t, path, []byte("same\n"))
	var rec recorder
	Golden(&rec, path, []byte("other\n"))
	if !rec.failed {
		t.Error("a differing golden file did not fail the test")
	}
}

func TestMissingFailsInCI(t *testing.T) {
	t.Setenv("CI", "true")
	var rec recorder
	func() {
		defer func() { _ = recover() }()
		Missing(&rec, "tmux", os.ErrNotExist, "apt-get install tmux")
	}()
	if !rec.fatal || rec.skipped {
		t.Errorf("under CI=true a missing dependency must fail, not skip: %+v", rec)
	}
	t.Setenv("CI", "")
	rec = recorder{}
	func() {
		defer func() { _ = recover() }()
		Missing(&rec, "tmux", os.ErrNotExist, "apt-get install tmux")
	}()
	if !rec.skipped || rec.fatal {
		t.Errorf("outside CI a missing dependency skips: %+v", rec)
	}
}

func TestLeaksSeesAGoroutine(t *testing.T) {
	var rec recorder
	c := Leaks(&rec)
	stop := make(chan struct{})
	go func() { <-stop }()
	func() {
		defer func() { _ = recover() }()
		c.deadline = 100e6 // 100ms: the test need not wait the full 10 s
		c.Check(0)
	}()
	close(stop)
	if !rec.fatal {
		t.Error("a goroutine left running was not reported")
	}
	Leaks(t).Check(0)
}

// recorder is a testing.TB that records failures and skips instead of
// ending the test; Fatal and Skip panic to stop the caller as the real
// ones do.
type recorder struct {
	testing.TB
	failed, fatal, skipped bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatal(...any)          { r.failed, r.fatal = true, true; panic(r) }
func (r *recorder) Fatalf(string, ...any) { r.failed, r.fatal = true, true; panic(r) }
func (r *recorder) Skipf(string, ...any)  { r.skipped = true; panic(r) }
