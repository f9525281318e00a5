package worldgen

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/world"
)

// longState is a tracker's initial state of about 60 words.
const longState = `Project Lantern tracks the ledger export service. Issue LL-7 "Export fails for empty ledgers" is open and assigned to omar.r; ` +
	`issue LL-9 "Totals drift after a currency change" is in review with priya.k; issue LL-12 "Archive button does nothing on mobile" ` +
	`is closed. The next release is due on the fourth of March and the team meets every Tuesday to triage new reports from the support desk.`

func trackerSpec(name, state string, tools ...string) *world.Spec {
	s := &world.Spec{Name: name, Domain: domain.MCP, InitialState: state}
	s.ActionSpace.Description = "The issue tracker's MCP server."
	for _, t := range tools {
		s.ActionSpace.Tools = append(s.ActionSpace.Tools, world.Tool{Name: t, InputSchema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"}}}`)})
	}
	return s
}

func newDedupRun(threshold float64) *run {
	return &run{worldFPs: map[uint64]string{}, taskFPs: map[uint64]string{}, storedTasks: map[string]int{},
		nearWorlds: newNearIndex(threshold)}
}

func task(id, instr string) *library.TaskEntry {
	return &library.TaskEntry{ID: id, Instruction: instr}
}

// TestNearDuplicateWorlds: a world whose long state differs from an
// accepted one's by a word or two collapses into it; the same state with
// other tools, a state reworded a lot, and short states that differ in a
// key stay.
func TestNearDuplicateWorlds(t *testing.T) {
	r := newDedupRun(DefaultNearDuplicate)
	accept := func(s *world.Spec) *rejection {
		tasks := []*library.TaskEntry{task(s.Name+"-t1", "Close the issue of "+s.Name+".")}
		return r.dedup(s, &tasks, &verdict{})
	}
	if rej := accept(trackerSpec("a", longState, "get_issue", "close_issue")); rej != nil {
		t.Fatalf("the first world: %v", rej)
	}
	tests := []struct {
		name string
		spec *world.Spec
		dup  bool
	}{
		{"one word changed", trackerSpec("b", strings.Replace(longState, "Tuesday", "Wednesday", 1), "get_issue", "close_issue"), true},
		{"a clause dropped", trackerSpec("c", strings.Replace(longState, " from the support desk", "", 1), "get_issue", "close_issue"), true},
		{"same state, other tools", trackerSpec("d", longState, "get_issue", "reopen_issue"), false},
		{"another project", trackerSpec("e", `Project Harbor tracks the billing gateway. Issue HB-2 "Refunds post twice" is open and assigned to lena.m; issue HB-5 "Invoices lose their footer" is closed. The quarterly audit starts next Monday and every open refund issue must be triaged before then by the payments team.`, "get_issue", "close_issue"), false},
		{"short state, other key", trackerSpec("f", "Issue WS-9 is open.", "get_issue", "close_issue"), false},
		{"short state, another key", trackerSpec("g", "Issue WS-8 is open.", "get_issue", "close_issue"), false},
	}
	for _, tt := range tests {
		rej := accept(tt.spec)
		if got := rej != nil && strings.Contains(rej.Reason, "near-duplicate of world a"); got != tt.dup {
			t.Errorf("%s: rejection %v, want near-duplicate %v", tt.name, rej, tt.dup)
		}
	}

	// Switched off, only exact fingerprints collapse.
	r = newDedupRun(DefaultNearDuplicate)
	r.nearWorlds = nil
	accept(trackerSpec("a", longState, "get_issue", "close_issue"))
	if rej := accept(trackerSpec("b", strings.Replace(longState, "Tuesday", "Wednesday", 1), "get_issue", "close_issue")); rej != nil {
		t.Errorf("near-duplicates off: %v", rej)
	}
}

// TestSignatureEstimatesJaccard: over random pairs of texts with known
// shingle overlap, the MinHash estimate stays near the true Jaccard
// similarity (64 hashes: standard error at most 0.0625).
func TestSignatureEstimatesJaccard(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	words := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("w%d", rng.IntN(1_000_000))
		}
		return out
	}
	var worst float64
	for range 200 {
		a := words(60)
		b := append([]string(nil), a...)
		k := rng.IntN(30)
		copy(b[60-k:], words(k)) // the last k words differ
		sa, _ := shingleSignature(strings.Join(a, " "))
		sb, _ := shingleSignature(strings.Join(b, " "))
		// 58 shingles each; those of the first 60-k words are shared
		shared := max(0, 60-k-2)
		want := float64(shared) / float64(2*58-shared)
		worst = max(worst, math.Abs(sa.similarity(&sb)-want))
	}
	if worst > 0.25 {
		t.Errorf("the estimate strays %.3f from the true similarity", worst)
	}
}

// BenchmarkNearIndex: looking a signature up in an index of 11,000
// worlds examines only the entries that share a band with it.
func BenchmarkNearIndex(b *testing.B) {
	ix := newNearIndex(DefaultNearDuplicate)
	rng := rand.New(rand.NewPCG(1, 1))
	text := func() string {
		var w []string
		for range 25 {
			w = append(w, fmt.Sprintf("w%d", rng.IntN(5000)))
		}
		return strings.Join(w, " ")
	}
	for i := range 11_000 {
		sig, _ := shingleSignature(text())
		ix.add("", fmt.Sprint(i), &sig)
	}
	sig, _ := shingleSignature(text())
	b.ResetTimer()
	for range b.N {
		ix.find("", "", &sig)
	}
}
