package worldgen

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/library"
	"github.com/agentworld/agentworld/internal/searchindex"
	"github.com/agentworld/agentworld/internal/world"
)

// maxFictionTasks bounds the questions drawn from one fact graph.
const maxFictionTasks = 8

// searchTools are the action space of a generated search world.
var searchTools = []world.Tool{
	{Name: "search", Description: "Search the world's documents; returns ranked results with URL, title and snippet.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)},
	{Name: "open_page", Description: "Open a document by its URL and return its text.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`)},
}

// buildFiction turns a generated fact graph into a search world: a
// document per entity rendered from its facts (attributes, and the
// relations it is the subject of), then questions whose answers follow
// from the facts: one attribute of one entity (easy), and every subject
// of a relation to one object (hard, several items, scored by item F1).
// Each question's reference solution searches, opens the supporting
// documents and answers.
func buildFiction(p plan, rf *rawFiction) (*candidate, error) {
	name := worldName(rf.Name, p.Tag)
	facts := &fiction.Facts{Entities: rf.Entities, Relations: rf.Relations, Retrieval: &fiction.Retrieval{}}
	if err := facts.Validate(); err != nil {
		return nil, reject(RungSchema, "fiction: %v", err)
	}
	if len(facts.Entities) == 0 {
		return nil, reject(RungSchema, "fiction: no entities")
	}
	byID := map[string]*fiction.Entity{}
	for i := range facts.Entities {
		e := &facts.Entities[i]
		if e.Name == "" {
			e.Name = e.ID
		}
		byID[e.ID] = e
	}
	urlOf := func(id string) string { return "https://" + name + ".example/" + id }
	about := map[string][]fiction.Relation{}
	for _, r := range facts.Relations {
		about[r.Subject] = append(about[r.Subject], r)
	}
	for _, e := range facts.Entities {
		var b strings.Builder
		fmt.Fprintf(&b, "%s", e.Name)
		if e.Type != "" {
			fmt.Fprintf(&b, " is a %s.", e.Type)
		} else {
			b.WriteString(".")
		}
		for _, k := range sortedKeys(e.Attributes) {
			fmt.Fprintf(&b, " %s's %s: %s.", e.Name, words(k), e.Attributes[k])
		}
		ids := []string{e.ID}
		for _, r := range about[e.ID] {
			fmt.Fprintf(&b, " %s — %s — %s.", e.Name, words(r.Predicate), byID[r.Object].Name)
			ids = append(ids, r.Object)
		}
		facts.Documents = append(facts.Documents, fiction.Document{URL: urlOf(e.ID), Title: e.Name, Text: b.String(), About: ids})
	}
	spec := &world.Spec{
		Name: name, Domain: "search",
		Description: "Search over an invented world: " + oneLine(rf.Topic),
		TaskDescription: "The environment is a search engine and page reader over the documents of an invented world (" +
			oneLine(rf.Topic) + "). The agent researches questions by searching and opening pages, then answers in plain text.",
		ActionSpace: world.ActionSpace{Tools: searchTools},
		Facts:       facts,
	}
	if err := spec.Validate(); err != nil {
		return nil, reject(RungSchema, "%v", err)
	}
	c := &candidate{spec: spec, support: map[string][]string{}}
	call := func(tool, key, val string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"name": tool, "arguments": map[string]string{key: val}})
		return b
	}
	answer := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	add := func(instr, diff string, items []string, docs []string, query string) {
		id := fmt.Sprintf("%s-t%d", name, len(c.tasks)+1)
		ref := []json.RawMessage{call("search", "query", query)}
		for _, d := range docs {
			ref = append(ref, call("open_page", "url", urlOf(d)))
		}
		ref = append(ref, answer(strings.Join(items, "; ")))
		check := &world.SuccessRule{Answer: &world.AnswerRule{Items: items}}
		if len(items) > 1 {
			check.Answer.MinF1 = 0.5
		}
		c.tasks = append(c.tasks, &library.TaskEntry{ID: id, World: name, Instruction: instr, Difficulty: diff, Check: check, Reference: ref, Tags: []string{"fiction"}})
		for _, d := range docs {
			c.support[id] = append(c.support[id], urlOf(d))
		}
	}
	// hard: every subject of one (predicate, object), two or more of them
	type po struct{ p, o string }
	groups := map[po][]string{}
	for _, r := range facts.Relations {
		groups[po{r.Predicate, r.Object}] = append(groups[po{r.Predicate, r.Object}], r.Subject)
	}
	keys := make([]po, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].p+keys[i].o < keys[j].p+keys[j].o })
	for _, k := range keys {
		subs := groups[k]
		if len(subs) < 2 || len(c.tasks) >= maxFictionTasks/2 {
			continue
		}
		var items []string
		for _, s := range subs {
			items = append(items, byID[s].Name)
		}
		obj := byID[k.o].Name
		add(fmt.Sprintf("List every entity with the relation %q to %s. Answer with their names, one per line.", words(k.p), obj),
			library.Hard, items, subs, words(k.p)+" "+obj)
	}
	// easy: one attribute of one entity
	for _, e := range facts.Entities {
		if len(c.tasks) >= maxFictionTasks {
			break
		}
		ks := sortedKeys(e.Attributes)
		if len(ks) == 0 {
			continue
		}
		k := ks[(p.Index+len(c.tasks))%len(ks)]
		add(fmt.Sprintf("What value do the documents give for %q of %s?", words(k), e.Name), library.Easy, []string{e.Attributes[k]}, []string{e.ID}, e.Name+" "+words(k))
	}
	return c, nil
}

// answerable is the answerable rung of a fictional task: retrieval over
// the world's documents with the question finds a supporting document
// among its top hits, and every expected item is in a supporting
// document's text.
func answerable(ix *searchindex.Index, t *library.TaskEntry, support []string) error {
	hits, err := ix.Search(t.Instruction, 10)
	if err != nil {
		return reject(RungAnswer, "%v", err)
	}
	found := false
	for _, h := range hits {
		for _, s := range support {
			if h.URL == s {
				found = true
			}
		}
	}
	if !found {
		return reject(RungAnswer, "no supporting document among the top %d hits of the question", len(hits))
	}
	for _, it := range t.Check.Answer.Items {
		ok := false
		for _, s := range support {
			if d, _ := ix.Doc(s); strings.Contains(d.Text, it) {
				ok = true
			}
		}
		if !ok {
			return reject(RungAnswer, "item %q is in no supporting document", it)
		}
	}
	return nil
}

func words(k string) string { return strings.ReplaceAll(strings.TrimSpace(k), "_", " ") }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
