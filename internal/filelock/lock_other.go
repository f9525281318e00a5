//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || windows)

package filelock

import (
	"errors"
	"os"
)

// lock fails where the system has no advisory file locks this package
// knows (flock and LockFileEx; e.g. not plan9, js, solaris): better no owner than two.
func lock(f *os.File) (held bool, err error) {
	return false, errors.New("file locks are not supported on this system")
}
