package filelock

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentworld/agentworld/internal/testkit"
)

func TestSecondAcquireInOneProcessIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.lock")
	l, err := Acquire(path, "thing x")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(path, "thing x")
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("second Acquire: %v, want ErrHeld", err)
	}
	for _, want := range []string{"thing x is in use", path, "pid " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	l2, err := Acquire(path, "thing x")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

// TestHelperHoldLock is the other process of the tests below: it takes the
// lock named by AGENTWORLD_TEST_LOCK, says so on stdout, and holds it until
// killed (or, as a safety net, a minute).
func TestHelperHoldLock(t *testing.T) {
	path := testkit.ChildEnv(t, "AGENTWORLD_TEST_LOCK", "TestLockHeldByAnotherProcess")
	if _, err := Acquire(path, "helper"); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	time.Sleep(time.Minute)
}

// TestLockHeldByAnotherProcess runs a second process that holds the lock:
// this one is refused with the holder's pid, and once the holder is killed
// with SIGKILL (no chance to clean up) the lock is free again.
func TestLockHeldByAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.lock")
	cmd := testkit.Child("TestHelperHoldLock", "AGENTWORLD_TEST_LOCK="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	testkit.StartChild(t, cmd)
	buf := make([]byte, 7)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("helper did not lock: %q %v", buf, err)
	}
	_, err = Acquire(path, "session database")
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("Acquire while another process holds the lock: %v, want ErrHeld naming pid %d", err, cmd.Process.Pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	l, err := Acquire(path, "session database")
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	if got := readPID(path); got != os.Getpid() {
		t.Errorf("lock file names pid %d, want this process's %d", got, os.Getpid())
	}
	l.Release()
}

// TestTryLockLeavesContent: TryLock locks the file itself without touching
// what it holds, a second open of it is refused, appending and reading go
// on under the lock, and closing the holder frees it.
func TestTryLockLeavesContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg.jsonl")
	if err := os.WriteFile(path, []byte("line 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if held, err := TryLock(f); err != nil || held {
		t.Fatalf("TryLock of a fresh file: held %v, %v", held, err)
	}
	other, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if held, err := TryLock(other); err != nil || !held {
		t.Fatalf("TryLock of a second open while the first holds it: held %v, %v; want held", held, err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("line 2\n"); err != nil {
		t.Fatalf("append under the lock: %v", err)
	}
	w.Close()
	if b, err := os.ReadFile(path); err != nil || string(b) != "line 1\nline 2\n" {
		t.Fatalf("content under the lock %q, %v", b, err)
	}
	f.Close()
	if held, err := TryLock(other); err != nil || held {
		t.Fatalf("TryLock once the holder closed: held %v, %v", held, err)
	}
}
