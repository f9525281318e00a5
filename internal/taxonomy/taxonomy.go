// Package taxonomy sorts what went wrong with a world model's prediction
// into a fixed set of error categories (format broken, invented content,
// wrong fact, inconsistent with the history, lost or drifted state, stale
// state after a multi-part change, truncated, meta-commentary), from the
// rule checks it runs itself, the flags of the generation and the judge's
// scores and stated weaknesses. The categories are fixed so reports and
// comparisons of different runs count the same things.
package taxonomy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/agentworld/agentworld/internal/judge"
	"github.com/agentworld/agentworld/internal/score"
)

// Category is one kind of error.
type Category string

// The categories, in report order.
const (
	FormatBroken     Category = "format_broken"
	InventedContent  Category = "invented_content"
	WrongFact        Category = "wrong_fact"
	InconsistentHist Category = "inconsistent_history"
	LostState        Category = "lost_state"
	StaleState       Category = "stale_state"
	Truncated        Category = "truncated"
	MetaCommentary   Category = "meta_commentary"
)

// All lists the categories in report order.
var All = []Category{FormatBroken, InventedContent, WrongFact, InconsistentHist, LostState, StaleState, Truncated, MetaCommentary}

// Titles are the categories' names for people.
var Titles = map[Category]string{
	FormatBroken:     "format broken",
	InventedContent:  "invented content",
	WrongFact:        "wrong fact",
	InconsistentHist: "inconsistent with history",
	LostState:        "lost or drifted state",
	StaleState:       "stale state after a multi-part change",
	Truncated:        "truncated",
	MetaCommentary:   "meta-commentary / breaking character",
}

// Valid reports whether c is one of All.
func (c Category) Valid() bool { return Titles[c] != "" }

// Input is what is known of one judged prediction. Truth and Action are
// optional: without them the rule checks that need them are skipped.
type Input struct {
	Prediction string
	// Truth is the real observation; Action the evaluated turn's action.
	Truth, Action string
	// Scores are the judge's; nil when the sample was not judged.
	Scores *score.Scores
	// Weaknesses are the judge's (or the rules scorer's) stated weaknesses.
	Weaknesses []string
	// Truncated and FinishReason are the generation's: a generation cut by
	// its token budget.
	Truncated    bool
	FinishReason string
}

// Source says where a finding came from.
type Source string

// The sources of findings.
const (
	FromRule     Source = "rule"     // a check of the text itself
	FromFlag     Source = "flag"     // the generation's flags
	FromJudge    Source = "judge"    // a stated weakness
	FromScore    Source = "score"    // a low dimension score
	FromCombined Source = "combined" // a multi-part action with a state error
)

// Finding is one category a prediction falls into and why.
type Finding struct {
	Category Category `json:"category"`
	Source   Source   `json:"source"`
	Evidence string   `json:"evidence"`
}

// LowScore is the highest dimension score that counts as an error of that
// dimension's category when no stated weakness names it (2 of 5: "poor").
const LowScore = 2

// phrases map stated weaknesses to categories; a weakness is matched in
// lower case against each category's fragments, in All order.
var phrases = []struct {
	cat   Category
	frags []string
}{
	{FormatBroken, []string{"format", "malformed", "invalid json", "not valid json", "syntax", "tree shape differs", "line layout", "markup", "structure differs", "wrong structure"}},
	{InventedContent, []string{"hallucinat", "invent", "fabricat", "made up", "made-up", "nonexistent", "non-existent", "does not exist", "spurious", "not present in the", "unsupported by", "extra content", "adds content"}},
	{WrongFact, []string{"incorrect", "wrong", "inaccura", "factual", "differs from the ground truth", "mismatch", "does not match", "doesn't match", "erroneous"}},
	{InconsistentHist, []string{"inconsistent", "contradict", "conflicts with", "earlier turn", "previous turn", "prior turn", "history"}},
	{LostState, []string{"drift", "lost", "forgot", "forgets", "not preserved", "missing state", "state was reset", "resets the state", "disappear", "dropped"}},
	{StaleState, []string{"stale", "outdated", "not updated", "does not reflect", "doesn't reflect", "fails to reflect", "only partially", "partial update", "only some of", "only one of"}},
	{Truncated, []string{"truncat", "cut off", "cuts off", "ends abruptly", "incomplete output", "unfinished"}},
	{MetaCommentary, []string{"meta-comment", "meta comment", "commentary", "breaks character", "breaking character", "out of character", "addresses the evaluator", "addresses the user", "explains instead", "as an ai"}},
}

// metaOpening matches a prediction that talks about its task instead of
// being the environment's output.
var metaOpening = regexp.MustCompile(`(?i)^\s*(sure[,!.]|okay[,!.]|certainly[,!.]|here(?: is|'s) (?:the|a|my) (?:predicted|simulated|next|likely)|as an ai\b|i (?:will|'ll|would|cannot|can't) (?:simulate|predict|now|not)|(?:the )?(?:predicted|simulated) (?:observation|output) (?:is|would be)\b|based on the (?:action|history)\b)`)

// Classify returns the categories in falls into, each once, in All order,
// with the first evidence found for it. An empty result means no error was
// found (which, for a sample without scores or weaknesses, means little).
func Classify(in Input) []Finding {
	found := map[Category]Finding{}
	add := func(c Category, s Source, ev string) {
		if _, ok := found[c]; !ok {
			found[c] = Finding{Category: c, Source: s, Evidence: ev}
		}
	}
	// Checks of the text and flags first: they are the most certain.
	if in.Truncated || in.FinishReason == "length" {
		add(Truncated, FromFlag, "generation cut by its token budget (finish_reason length)")
	}
	if reason, text := judge.Manipulation(in.Prediction, in.Truth); reason != "" {
		add(MetaCommentary, FromRule, fmt.Sprintf("addresses the evaluator (%s): %q", reason, clip(text, 80)))
	}
	if m := metaOpening.FindString(in.Prediction); m != "" {
		add(MetaCommentary, FromRule, fmt.Sprintf("speaks about the task instead of being the output: %q", clip(strings.TrimSpace(m), 80)))
	}
	if t := strings.TrimSpace(in.Truth); t != "" && (t[0] == '{' || t[0] == '[') && json.Valid([]byte(t)) {
		if p := strings.TrimSpace(in.Prediction); !json.Valid([]byte(p)) {
			add(FormatBroken, FromRule, "the real observation is JSON but the prediction is not valid JSON")
		}
	}
	for _, w := range in.Weaknesses {
		lw := strings.ToLower(w)
		for _, p := range phrases {
			for _, f := range p.frags {
				if strings.Contains(lw, f) {
					add(p.cat, FromJudge, clip(w, 160))
					break
				}
			}
		}
	}
	if in.Scores != nil {
		low := func(c Category, dim string, v int) {
			if v > 0 && v <= LowScore {
				add(c, FromScore, fmt.Sprintf("%s score %d of 5", dim, v))
			}
		}
		low(FormatBroken, "format", in.Scores.Format)
		low(WrongFact, "factuality", in.Scores.Factuality)
		low(InconsistentHist, "consistency", in.Scores.Consistency)
	}
	// A state error after an action that changes several things at once is
	// the "state-change cliff": part of the change is shown, part is not.
	if n := changes(in.Action); n >= 2 {
		for _, c := range []Category{LostState, WrongFact} {
			if f, ok := found[c]; ok {
				add(StaleState, FromCombined, fmt.Sprintf("the action makes %d changes and the prediction has a %s (%s)", n, Titles[c], f.Evidence))
				break
			}
		}
	}
	out := make([]Finding, 0, len(found))
	for _, c := range All {
		if f, ok := found[c]; ok {
			out = append(out, f)
		}
	}
	return out
}

// changes counts the separate changes an action asks for: commands typed
// in a terminal action (and commands chained with && or ;), or tool calls
// named in a JSON action.
func changes(action string) int {
	if action == "" {
		return 0
	}
	n := 0
	for _, c := range judge.TypedCommands(action) {
		n += 1 + strings.Count(c, "&&") + strings.Count(c, "; ")
	}
	if n > 0 {
		return n
	}
	return strings.Count(action, `"name":`) + strings.Count(action, `"name" :`)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// Counts are the number of samples in each category per domain, with the
// samples classified.
type Counts struct {
	// Classified counts the samples looked at per domain; Clean those with
	// no finding.
	Classified map[string]int                 `json:"classified"`
	Clean      map[string]int                 `json:"clean"`
	ByDomain   map[string]map[Category]int    `json:"by_domain"`
	Examples   map[string]map[Category]string `json:"-"`
}

// NewCounts returns empty counts.
func NewCounts() *Counts {
	return &Counts{Classified: map[string]int{}, Clean: map[string]int{}, ByDomain: map[string]map[Category]int{}, Examples: map[string]map[Category]string{}}
}

// Add counts one sample of domain d with its findings; sample names it for
// the examples kept (the first of each category).
func (c *Counts) Add(d, sample string, fs []Finding) {
	c.Classified[d]++
	if len(fs) == 0 {
		c.Clean[d]++
		return
	}
	if c.ByDomain[d] == nil {
		c.ByDomain[d] = map[Category]int{}
		c.Examples[d] = map[Category]string{}
	}
	for _, f := range fs {
		c.ByDomain[d][f.Category]++
		if _, ok := c.Examples[d][f.Category]; !ok {
			c.Examples[d][f.Category] = sample
		}
	}
}

// Domains returns the domains counted, sorted.
func (c *Counts) Domains() []string {
	out := make([]string, 0, len(c.Classified))
	for d := range c.Classified {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// Total sums a category over every domain.
func (c *Counts) Total(cat Category) int {
	n := 0
	for _, m := range c.ByDomain {
		n += m[cat]
	}
	return n
}

// Share is the fraction of domain d's classified samples in cat.
func (c *Counts) Share(d string, cat Category) float64 {
	if c.Classified[d] == 0 {
		return 0
	}
	return float64(c.ByDomain[d][cat]) / float64(c.Classified[d])
}
