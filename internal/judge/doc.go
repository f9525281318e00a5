// Package judge scores a world model's predicted observation against the real
// one the way AgentWorldBench does: it builds the judge conversation (a
// per-domain rubric as system prompt, then history, current action,
// prediction and ground truth), and parses the judge's free-form answer into
// five 1..5 scores (Format, Factuality, Consistency, Realism, Quality) with
// the published extraction rules, every fallback included.
//
// It also holds Rules, an offline scorer made of deterministic per-domain
// checks (format validity, exact match of deterministic content, preservation
// of pre-existing content, normalized similarity) mapped onto the same five
// dimensions. Rules is a cheap stand-in for iterating without an LLM; it is
// not the rubric judge and its numbers are not comparable with published
// AgentWorldBench scores.
package judge
