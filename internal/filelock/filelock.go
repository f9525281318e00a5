// Package filelock gives a file one owning process at a time: an exclusive,
// non-blocking lock on a lock file beside it (flock(2) on Unix, LockFileEx
// on Windows). The operating system drops the lock when its owner exits,
// however it exits (kill -9 included), so a crash never leaves a stale lock
// behind and nothing needs cleaning up by hand.
//
// The lock file itself is left in place on release: removing it would let
// a process that opened the old file and a process that created a new one
// both believe they hold the lock.
package filelock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrHeld is wrapped by Acquire's error when another owner holds the lock.
var ErrHeld = errors.New("held by another process")

// Lock is a held lock; Release gives it back.
type Lock struct {
	f    *os.File
	path string
}

// Acquire takes the exclusive lock on lockPath (created if needed, with its
// directory), never waiting. what names the thing guarded, for the error a
// second owner gets, e.g. "session database /x/sessions.db". The lock is
// per open file: a second Acquire of the same path fails even in the same
// process. The owner's process id is written into the lock file, so the
// error can name it.
func Acquire(lockPath, what string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, fmt.Errorf("%s: lock: %w", what, err)
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: lock %s: %w", what, lockPath, err)
	}
	held, err := lock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: lock %s: %w", what, lockPath, err)
	}
	if held {
		owner := ""
		if pid := readPID(lockPath); pid > 0 {
			owner = fmt.Sprintf(" (pid %d)", pid)
		}
		f.Close()
		return nil, fmt.Errorf("%s is in use: %w%s, which holds %s; stop it or use another path", what, ErrHeld, owner, lockPath)
	}
	// Best effort: the pid only makes a second owner's error clearer.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f, path: lockPath}, nil
}

// readPID reads the owner's process id from a lock file; 0 when it cannot.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// TryLock takes the exclusive lock on f itself, an open file, never
// waiting; held reports another owner. It is for a file whose content must
// stay as written (Acquire writes the owner's pid into its lock file): a
// writer marks the file it is still appending to, and whoever would
// replace the file asks whether its writer is gone. The lock lasts until f
// is closed (or its process exits), and like Acquire's it belongs to the
// open file: another open of the same file, in this process or another,
// does not hold it. On Windows it covers a byte far past any content, so
// reading and appending are not blocked.
func TryLock(f *os.File) (held bool, err error) {
	return lock(f)
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Release gives the lock back; calling it again does nothing.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the lock
	l.f = nil
	return err
}
