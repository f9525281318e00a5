// Package judge scores a world model's predicted observation against the real
// one the way AgentWorldBench does: it builds the judge conversation (a
// per-domain rubric as system prompt, then history, current action,
// prediction and ground truth, laid out as the official evaluation script
// lays them out), and parses the judge's free-form answer into five 1..5
// scores (Format, Factuality, Consistency, Realism, Quality) with the
// published extraction rules, every fallback included. Its two pairwise
// modes ask which of two observations is the real one (turing) or the
// closer to the truth (reference), answered in \boxed{A} or \boxed{B}.
//
// The judge text is agentworld's own unless [LoadPrompts] reads the
// official text from a checkout of the official repository: the official
// prompts are not ours to ship, and scores judged with our text are not
// comparable with the published ones (every result says which text it
// used).
//
// It also holds Rules, an offline scorer made of deterministic per-domain
// checks (format validity, exact match of deterministic content, preservation
// of pre-existing content, normalized similarity) mapped onto the same five
// dimensions. Rules is a cheap stand-in for iterating without an LLM; it is
// not the rubric judge and its numbers are not comparable with published
// AgentWorldBench scores.
package judge
