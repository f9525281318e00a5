// Package examples bundles the example world specs (worlds/) and the
// recorded trajectories (recordings/) into the binary, so `agentworld
// serve` runs on a fresh machine with no files: its default backend
// replays the recordings over the example worlds.
package examples

import "embed"

// FS holds worlds/*.yaml and recordings/*.jsonl.
//
//go:embed worlds/*.yaml recordings/*.jsonl
var FS embed.FS
