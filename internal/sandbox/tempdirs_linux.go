//go:build linux

package sandbox

import (
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir creates dir/lock and holds an exclusive flock on it for as long as
// the returned file stays open: a live terminal's directory is always
// locked, so one whose lock can be taken belongs to a dead process. The lock
// is taken under a temporary name and then renamed, so no other process can
// see the file unlocked.
func LockDir(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, "lock.tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "lock")); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// cleanStale removes the terminal directories under tempDir ("" = the
// system temp dir) that a killed process left behind: only directories of
// this user whose lock file exists and can be locked, i.e. whose owner is
// provably gone. Anything else (no lock yet, someone else's) is left alone.
func CleanStale(tempDir string, log *slog.Logger) {
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	dirs, _ := filepath.Glob(filepath.Join(tempDir, TermDirPrefix+"*"))
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			log.Info("removing a terminal directory left by a killed process", "dir", dir)
			_ = os.RemoveAll(dir)
		}
		f.Close()
	}
}
