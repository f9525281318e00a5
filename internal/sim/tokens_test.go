package sim

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/tokencount"
)

// TestBudgetCutsByServerCounts checks that truncation follows the server's
// counts, not the byte estimate: with turns that are long in bytes but few
// in tokens nothing is cut, and with the estimate the same history is cut.
func TestBudgetCutsByServerCounts(t *testing.T) {
	var hist []HistoryTurn
	for i := 0; i < 10; i++ {
		hist = append(hist, HistoryTurn{Message: strings.Repeat("m", 400), Assistant: strings.Repeat("o", 400)})
	}
	server := newBudgetState(Budget{Limit: 500, Count: func(s string) int { return len(strings.Fields(s)) }}, "system prompt")
	server.replay(hist)
	if server.place(1) || server.cut != 0 {
		t.Fatalf("server counts: cut %d, want none (10 turns of ~10 tokens)", server.cut)
	}
	est := newBudgetState(Budget{Limit: 500}, "system prompt")
	est.replay(hist)
	if est.cut == 0 {
		t.Fatal("estimate: no cut, want one (10 turns of 200 estimated tokens)")
	}
}

// TestBudgetCutsWhereTheSumSays: the budget keeps the shown turns' total
// as turns come and cuts go; every cut is where summing the shown turns'
// tokens afresh at each step puts it, live and in a replay of the history.
func TestBudgetCutsWhereTheSumSays(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	b := Budget{Limit: 3000, LowWater: 2000}
	live := newBudgetState(b, "system prompt")
	sys := tokencount.Estimate("system prompt") + messageOverhead
	var hist []HistoryTurn
	var tokens []int
	cut := 0
	for turn := 1; turn <= 300; turn++ {
		msg := strings.Repeat("m", rng.IntN(2000))
		newTok := tokencount.Estimate(msg) + messageOverhead
		// The reference: sum the shown turns afresh.
		total := sys + newTok
		for _, t := range tokens[cut:] {
			total += t
		}
		if total > b.Limit {
			for cut < len(tokens) && total > b.LowWater {
				total -= tokens[cut]
				cut++
			}
		}
		live.sync(hist)
		live.place(newTok)
		if live.cut != cut {
			t.Fatalf("turn %d: cut %d, summing afresh gives %d", turn, live.cut, cut)
		}
		h := HistoryTurn{Message: msg, Assistant: strings.Repeat("o", rng.IntN(3000))}
		hist = append(hist, h)
		tokens = append(tokens, tokencount.Estimate(h.Message)+tokencount.Estimate(h.Assistant)+2*messageOverhead)
	}
	if cut == 0 {
		t.Fatal("no cut in 300 turns; the test does not exercise the budget")
	}
	replayed := newBudgetState(b, "system prompt")
	replayed.replay(hist)
	if replayed.cut != cut {
		t.Fatalf("replay cut %d, live %d", replayed.cut, cut)
	}
}
