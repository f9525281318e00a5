//go:build !linux

package realenv

import (
	"errors"
	"log/slog"
	"os"
)

// lockDir and cleanStale need flock; the sandbox needs Linux anyway.
func lockDir(string) (*os.File, error) {
	return nil, errors.New("terminal directories need Linux")
}

func cleanStale(string, *slog.Logger) {}
