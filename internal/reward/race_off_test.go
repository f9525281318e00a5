//go:build !race

package reward

const raceEnabled = false
