package mcpworld

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentworld/agentworld/internal/testkit"
)

// npmDir finds tools/npm (AGENTWORLD_NPM_TOOLS overrides it). Tests that
// drive npm packages skip only when node itself is missing; with node
// present, missing packages are a setup error that must fail loudly so CI
// never silently skips them.
func npmDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testkit.Missing(t, "node (the npm MCP server tests need it)", err, ".ci/setup.d/40-mcp-npm.sh installs it")
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

// npmModule is the path of a file inside an installed npm package.
func npmModule(t *testing.T, pkg, file string) string {
	t.Helper()
	p := filepath.Join(npmDir(t), "node_modules", pkg, file)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("npm package %s lacks %s: %v", pkg, file, err)
	}
	return p
}

// memoryServer is the argv of the pinned memory MCP server.
func memoryServer(t *testing.T) []string {
	return []string{"node", npmModule(t, "@modelcontextprotocol/server-memory", "dist/index.js")}
}

// everythingServer is the argv of the pinned "everything" MCP server on
// stdio.
func everythingServer(t *testing.T) []string {
	return []string{"node", npmModule(t, "@modelcontextprotocol/server-everything", "dist/index.js"), "stdio"}
}
