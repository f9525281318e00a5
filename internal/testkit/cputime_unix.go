//go:build unix

package testkit

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time this process has used so far (user and
// system), so a benchmark can report its work per core-second on a
// machine it shares.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
