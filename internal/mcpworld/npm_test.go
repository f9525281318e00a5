package mcpworld

import (
	"testing"

	"github.com/agentworld/agentworld/internal/testkit"
)

// memoryServer is the argv of the pinned memory MCP server.
func memoryServer(t *testing.T) []string {
	return []string{"node", testkit.NPMModule(t, "@modelcontextprotocol/server-memory", "dist/index.js")}
}

// everythingServer is the argv of the pinned "everything" MCP server on
// stdio.
func everythingServer(t *testing.T) []string {
	return []string{"node", testkit.NPMModule(t, "@modelcontextprotocol/server-everything", "dist/index.js"), "stdio"}
}
