package worldgen

import (
	"fmt"
	"strings"
)

// PromptVersion names the generator prompts below; it changes when their
// wording does, and is part of every entry's provenance.
const PromptVersion = "worldgen-v1"

// The generator prompts, in our own words. One system message says what a
// candidate is (a world in the unified schema and tasks with checks); the
// user message says what this candidate is about.
const systemPrompt = `You design environments for training computer-use agents. An environment
is simulated by a language model, so it needs no code: it is a description.
Answer with ONE JSON object and nothing else.

For a tool environment (domain mcp, search or swe) or a text-action one
(terminal, web, android, os), the object is:
{"world": {
   "name": short-kebab-name,
   "domain": one of mcp, search, swe, terminal, web, android, os,
   "description": one line,
   "task_description": what the environment is, in a paragraph,
   "action_space": a list of tools {"name", "description", "input_schema" (a JSON Schema object)}
                   for mcp/search/swe, or a text describing the actions for the others,
   "initial_state": the concrete state before the first action (records, files, screen),
   "demonstrations": [{"action": an action in the domain's format, "observation": its result}]
 },
 "tasks": [{
   "instruction": what the agent must achieve, concretely,
   "difficulty": "easy" | "medium" | "hard",
   "check": exactly one of
      {"state": [{"entity": id, "attribute": name, "value": v}]}   facts a result must show at the end,
      {"answer": {"items": [..], "min_f1": 0..1}}                    the expected final answer items,
      {"final_observation": regular expression}                      a pattern of the last result,
      {"judge": {"criterion": what a successful episode achieved}}   only when no rule above can decide,
   "reference": [actions that solve the task, the last one the final answer or end action]
 }]}

Rules: the initial state must NOT already satisfy any task's check; a task
must need at least one action that changes or reads the state; prefer
checks on state or answers over patterns; tool actions are
{"name": tool, "arguments": {...}}; a final answer is a plain string.`

// fictionSystemPrompt asks for a fact graph: documents and questions are
// rendered from it by code, so every answer follows from the facts.
const fictionSystemPrompt = `You invent small, self-consistent fictional worlds for search agents to
research. Answer with ONE JSON object and nothing else:
{"fiction": {
   "name": short-kebab-name,
   "topic": one line,
   "entities": [{"id": kebab-id, "type": singular noun, "name": display name,
                 "attributes": {name: value as text}}],
   "relations": [{"subject": entity id, "predicate": snake_case verb phrase, "object": entity id}]
}}
Use invented names only. Give 6 to 30 entities, each with 2 to 5
attributes whose values are specific (dates, numbers, places), and
relations that group several subjects under one object, so that questions
with several answers exist. Never give one attribute two values.`

// userPrompt describes one candidate.
func (p plan) userPrompt() string {
	var b strings.Builder
	switch p.Source {
	case SourceSeed:
		fmt.Fprintf(&b, "Design an environment from this description:\n%s\n", p.SeedText)
	case SourceMCP:
		fmt.Fprintf(&b, "Here is a real MCP server's environment:\n%s\n\nDesign a variant of it: %s. Keep the domain mcp.\n", p.ParentJSON, mutations[p.Mutation])
	case SourceFiction:
		fmt.Fprintf(&b, "Invent a world about: %s.\n", p.Topic)
	default:
		fmt.Fprintf(&b, "Design a %s environment about: %s.\n", p.Domain, p.Topic)
	}
	fmt.Fprintf(&b, "Give %d tasks of mixed difficulty. Variation seed: %d.", p.Tasks, p.Seed)
	return b.String()
}

// mutations of an imported MCP world, by name.
var mutations = map[string]string{
	"rename":      "rename its tools and their arguments to another vendor's vocabulary, same behaviour",
	"extend":      "add two or three tools a newer version of the server would have",
	"remove":      "remove the tools a minimal deployment would leave out",
	"other-state": "keep the tools and start from a different, realistic initial state",
}

var mutationNames = []string{"rename", "extend", "remove", "other-state"}

// topics of the domain × topic mixture.
var topics = []string{
	"customer support tickets", "travel booking", "inventory of a small warehouse",
	"university course registration", "personal finance and budgets", "a hospital appointment desk",
	"a city library", "cloud infrastructure incidents", "a recipe and meal planner",
	"an open-source project's issues", "a car rental fleet", "a music streaming catalogue",
	"a real estate listing site", "a school's grade book", "a logistics company's shipments",
	"a research lab's experiment log", "an online store's orders", "a conference schedule",
}

// allDomains is the mixture's default domain list.
var allDomains = []string{"mcp", "search", "terminal", "swe", "web", "android", "os"}
