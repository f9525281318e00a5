package cli

import "github.com/spf13/cobra"

// docPages maps each top-level command to the page of the manual (under
// docs/ in the repository) that explains it; a subcommand has its parent's
// page. TestEveryCommandNamesItsPage keeps the map whole and every page real.
var docPages = map[string]string{
	"agentworld": "README.md",
	"version":    "README.md",
	"serve":      "docs/simulator.md",
	"play":       "docs/simulator.md",
	"mcp":        "docs/worlds.md",
	"world":      "docs/worlds.md",
	"bench":      "docs/benchmark.md",
	"data":       "docs/data.md",
	"reward":     "docs/rewards.md",
	"rollout":    "docs/sim-rl.md",
	"template":   "docs/research.md",
	"research":   "docs/research.md",
	"realenv":    "docs/real-environments.md",
	"verify":     "docs/real-environments.md",
	"ui":         "docs/benchmark.md",
}

// docPage is the manual page of cmd ("" for a command the map lacks, which
// the test refuses), for the "Manual:" line of its help.
func docPage(cmd *cobra.Command) string {
	for cmd.HasParent() && cmd.Parent().HasParent() {
		cmd = cmd.Parent()
	}
	return docPages[cmd.Name()]
}
