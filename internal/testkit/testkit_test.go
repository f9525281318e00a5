package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	// Several goroutines, so one of an earlier test still exiting cannot
	// hide them.
	stop := make(chan struct{})
	for range 5 {
		go func() { <-stop }()
	}
	func() {
		defer func() { _ = recover() }()
		c.deadline = 100e6 // 100ms: the test need not wait the full minute
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

func TestTxtarRoundTrip(t *testing.T) {
	in := "comment line\n-- a.request --\nGET /x\n-- b --\n{\"k\":1}\n\n"
	a := ParseTxtar([]byte(in))
	if string(a.Comment) != "comment line\n" || len(a.Files) != 2 || a.Files[0].Name != "a.request" || string(a.Files[1].Data) != "{\"k\":1}\n\n" {
		t.Fatalf("parsed %+v", a)
	}
	if got := string(a.Format()); got != in {
		t.Errorf("Format = %q, want %q", got, in)
	}
}

func FuzzParseTxtar(f *testing.F) {
	f.Add("c\n-- x --\ndata\n")
	f.Add("-- --\n-- a --")
	f.Fuzz(func(t *testing.T, s string) {
		a := ParseTxtar([]byte(s))
		b := ParseTxtar(a.Format())
		if len(a.Files) != len(b.Files) || string(a.Comment) != string(b.Comment) {
			t.Fatalf("reformatted archive differs: %+v vs %+v", a, b)
		}
	})
}

// TestChildHelper is the child process of TestChild.
func TestChildHelper(t *testing.T) {
	fmt.Printf("child got %q\n", ChildEnv(t, "AGENTWORLD_TESTKIT_CHILD", "TestChild"))
}

// TestChild re-executes this test binary with [Child] and checks that only
// the named test ran and that it read the variable the parent set.
func TestChild(t *testing.T) {
	cmd := Child("TestChildHelper", "AGENTWORLD_TESTKIT_CHILD=hello there")
	cmd.Args = append(cmd.Args, "-test.v")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `child got "hello there"`) {
		t.Errorf("the child did not report the variable:\n%s", out)
	}
	if runs := strings.Count(string(out), "=== RUN"); runs != 1 {
		t.Errorf("the child ran %d tests, want only TestChildHelper:\n%s", runs, out)
	}
}

func TestDecodeLines(t *testing.T) {
	type row struct{ A int }
	got := DecodeLines[row](t, []byte("{\"A\":1}\n\n{\"A\":2}\n"))
	if len(got) != 2 || got[0].A != 1 || got[1].A != 2 {
		t.Errorf("got %+v", got)
	}
	var rec recorder
	func() {
		defer func() { recover() }()
		DecodeLines[row](&rec, []byte("{\"A\":1}\nnot json\n"))
	}()
	if !rec.fatal {
		t.Error("a line that is not JSON did not fail the test")
	}
}
