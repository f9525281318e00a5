//go:build race

package reward

// raceEnabled: the race detector slows scoring several times over, so the
// load test runs a quarter of its requests under it (the full acceptance
// size runs without it).
const raceEnabled = true
