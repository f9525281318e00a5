//go:build !race

package cli

// raceEnabled says this test binary was built with -race; binaries the
// tests build use the same flag, so they reuse its compiled packages.
const raceEnabled = false
