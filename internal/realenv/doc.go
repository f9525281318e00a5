// Package realenv drives real environments beside the simulator: a bash shell
// in tmux inside a bubblewrap sandbox (the Terminal domain) and any MCP server
// over stdio (the MCP domain). Every session is recorded as a unified
// trajectory, can be exported as AgentWorldBench records, stepped in shadow
// beside a world model to measure divergence, and checked against task
// scripts.
package realenv
