package judge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/trajectory"
)

// BenchmarkRules scores a short prediction and a copy of the ground truth
// with one line changed against rows shaped like the published ones (8
// turns of terminal text with escapes and non-ASCII, ~185 KB a row), at
// every turn, so that the cost per sample of the rules judge shows beside
// bench's (BenchmarkRun840 in internal/bench).
//
//	go test -run '^$' -bench Rules -benchmem ./internal/judge
func BenchmarkRules(b *testing.B) {
	chunk := "drwxr-xr-x 2 root root 4096 \"src\" <div class='x'>ünïcødé 数据\u2028</div>\tdone\n"
	const turns = 8
	prompts := make([]string, turns)
	responses := make([]string, turns)
	for t := range turns {
		prompts[t] = fmt.Sprintf("### Turn %d\n**Action:**\nACTION-%d %s", t+1, t+1, strings.Repeat(chunk, 30))
		responses[t] = fmt.Sprintf("**Environment Observation:**\nOBS-%d at 2025-03-14T09:21:0%dZ\n%s", t+1, t, strings.Repeat(chunk, 190))
	}
	for _, d := range []string{"terminal", "web", "mcp"} {
		recs := make([]*trajectory.Record, turns)
		for t := range turns {
			recs[t] = &trajectory.Record{Task: "bench/" + d, ID: trajectory.IntID("1"), Prompt: prompts, Response: responses,
				CurrentPrompt: prompts[t], TurnIdx: t + 1, TotalTurns: turns}
		}
		for _, pred := range []struct{ name, text string }{
			{"short", "ok"},
			{"near", strings.Replace(responses[turns-1], "4096", "8192", 1)},
		} {
			b.Run(d+"/"+pred.name, func(b *testing.B) {
				for i := range b.N {
					Rules(recs[i%turns], pred.text)
				}
			})
		}
	}
}
