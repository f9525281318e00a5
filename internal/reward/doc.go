// Package reward computes the hybrid reward of one world-model prediction
// against the real observation, as the published world model is trained
// with: a rubric component (the domain's LLM judge conversation and parser
// from [judge], five dimensions 1..5, mean × 5 ∈ [5, 25]) and a rule
// component (a per-domain binary verifier × 25: format validity, and strict
// equality of the deterministic content after [volatile] masking), mixed
// 0.9 : 0.1 by default (weights summing to 1), either as a weighted sum or by drawing one of the
// two per item (seeded).
//
// Against reward hacking the judge sees the prediction with thinking
// removed and always the ground truth; a prediction that addresses the
// grader or praises itself ([judge.Manipulation]) is not judged: it gets
// the rubric floor (5) and rule 0, flagged, with a reason; a verdict that
// leaves a dimension out or scores one outside 1..5 is unusable
// ([judge.ParseStrict]), retried and then handled by the failure policy; a
// judge of the same model family as the policy is refused unless allowed. Judge answers are cached by content hash, judge calls are
// bounded in concurrency and rate, and a judge that never parses is handled
// by an explicit policy ([Policy]) and counted, never silently 0.
//
// An item's prompt is the RL row's chat messages (or a chat-templated
// rendering of them): the judge conversation is built from them with the
// same history, current turn, prediction and truth as `bench judge` builds
// for the record the row came from ([judge.Messages], one builder).
//
// [Scorer] scores items; [Handler] serves it over HTTP with the native batch
// API and the routes OpenRLHF, slime and NeMo Gym call; [ScoreFile] scores
// a JSONL file offline and resumes after a crash.
package reward
