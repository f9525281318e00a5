//go:build !linux

package sandbox

import (
	"errors"
	"log/slog"
	"os"
)

// LockDir and CleanStale need flock; the sandbox needs Linux anyway.
func LockDir(string) (*os.File, error) {
	return nil, errors.New("terminal directories need Linux")
}

func CleanStale(string, *slog.Logger) {}
