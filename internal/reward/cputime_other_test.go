//go:build !unix

package reward

import "time"

// cpuTime is unknown here; benchmarks fall back to wall time.
func cpuTime() time.Duration { return 0 }
