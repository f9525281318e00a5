//go:build unix

package reward

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used (user and system), so a
// benchmark can report work per core-second on a machine it shares.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
