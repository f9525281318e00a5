//go:build !unix

package cluster

import "time"

// cpuTime is 0 where getrusage is not available: the benchmark then
// reports no CPU.
func cpuTime() time.Duration { return 0 }
