package testkit

import "runtime"

// HeapAfterGC is the heap in use after a collection
// (runtime.MemStats.HeapAlloc): the measure of the memory-bound tests,
// which RSS follows plus the runtime's spare pages. Tests compare two
// readings of it, never a duration.
func HeapAfterGC() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
