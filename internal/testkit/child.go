package testkit

import (
	"os"
	"os/exec"
	"testing"
)

// Child returns a command that runs this test binary again as a child
// process: only the test named test (matched as ^test$, once, whatever
// -count the parent had; "" runs no test, for a TestMain that takes over),
// with env (KEY=VALUE pairs) added to this process's environment. A test
// that must kill a process midway (kill -9 resume, lock ownership, crash
// recovery) uses it to make that process itself; the caller sets the
// command's output, adds arguments (-test.v) and starts it. The child test
// reads its settings with [ChildEnv].
func Child(test string, env ...string) *exec.Cmd {
	run := "-test.run=^$"
	if test != "" {
		run = "-test.run=^" + test + "$"
	}
	cmd := exec.Command(os.Args[0], run, "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// ChildEnv returns the environment variable key that the parent test
// (named in the skip message) set when it started this test with [Child].
// When key is unset, the test binary is running normally, and the child
// test skips.
func ChildEnv(t testing.TB, key, parent string) string {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		t.Skip("a child process of " + parent + " (started with " + key + " set)")
	}
	return v
}

// StartChild starts cmd (a [Child]) and, when the test ends, kills it and
// waits for it, so that no child outlives its test whatever the test did.
func StartChild(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}
