//go:build windows

package filelock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lock tries an exclusive, fail-immediately LockFileEx on f; held reports
// another owner. It locks a byte range far past the file's content so the
// owner's pid stays readable by others.
func lock(f *os.File) (held bool, err error) {
	ol := &windows.Overlapped{Offset: 0, OffsetHigh: 0x7fffffff}
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return true, nil
	}
	return false, err
}
