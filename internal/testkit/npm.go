package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// NPMDir is the repository's tools/npm, where .ci/setup.d/40-mcp-npm.sh
// installs the pinned npm MCP servers and clients the tests drive for
// real (AGENTWORLD_NPM_TOOLS names another). A test that needs them skips
// only when node itself is missing (and fails under CI); with node
// present, missing packages are a setup error that fails loudly, so CI
// never silently skips them.
func NPMDir(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		Missing(t, "node (the npm MCP tests need it)", err, ".ci/setup.d/40-mcp-npm.sh installs it")
	}
	dir := os.Getenv("AGENTWORLD_NPM_TOOLS")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				dir = filepath.Join(d, "tools", "npm")
				break
			}
			if filepath.Dir(d) == d {
				t.Fatal("no go.mod above the test directory")
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol")); err != nil {
		t.Fatalf("npm MCP packages are not installed in %s (%v): run `bash .ci/setup.d/40-mcp-npm.sh`", dir, err)
	}
	return dir
}

// NPMModule is the path of a file inside an installed npm package of
// [NPMDir]; a package installed without it fails the test.
func NPMModule(t testing.TB, pkg, file string) string {
	t.Helper()
	p := filepath.Join(NPMDir(t), "node_modules", pkg, file)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("npm package %s lacks %s: %v (is tools/npm/node_modules older than its package-lock.json? run `bash .ci/setup.d/40-mcp-npm.sh`)", pkg, file, err)
	}
	return p
}
