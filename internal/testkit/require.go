package testkit

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true, as GitHub Actions and
// .ci/run set it). There a missing dependency is a failure: a skipped test
// would let CI pass without testing against the real thing.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing reports that a dependency the test needs is absent (err says
// why; install says how to get it): the test is skipped on a developer
// machine and fails under CI=true.
func Missing(t testing.TB, what string, err error, install string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is missing in CI (%v): %s", what, err, install)
	}
	t.Skipf("%s is missing (%v): %s", what, err, install)
}

// LookPath returns the path of the program bin, reporting it [Missing]
// when it is not on PATH.
func LookPath(t testing.TB, bin, install string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		Missing(t, bin, err, install)
	}
	return p
}
