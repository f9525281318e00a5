// Package fiction builds invented, self-consistent worlds: a world spec's
// `facts` section (entities, attributes, relations, documents) that every
// session of the world starts from, and the world ledger — concrete facts the
// simulator asserted in observations (IDs, names, values it had to invent),
// extracted, stored per world, shown to later steps of any session of that
// world, and checked for contradictions.
package fiction

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentworld/agentworld/internal/fielderr"
)

// Facts is a world spec's `facts` section: the canonical truth of an
// invented world.
type Facts struct {
	Entities  []Entity   `json:"entities,omitempty"`
	Relations []Relation `json:"relations,omitempty"`
	Documents []Document `json:"documents,omitempty"`
	// Retrieval, when set, keeps the documents out of the system prompt:
	// each step gets only those a full-text search for its action finds
	// (internal/worldhooks), so a world can hold thousands. nil puts every
	// document into the prompt.
	Retrieval *Retrieval `json:"retrieval,omitempty"`
}

// Retrieval configures how a step's documents are found.
type Retrieval struct {
	// TopK is how many documents a search action retrieves; 0 means
	// DefaultTopK.
	TopK int `json:"top_k,omitempty"`
}

// DefaultTopK is the documents a search retrieves when Retrieval.TopK is 0.
const DefaultTopK = 5

// K is the number of documents to retrieve.
func (r *Retrieval) K() int {
	if r == nil || r.TopK <= 0 {
		return DefaultTopK
	}
	return r.TopK
}

// Entity is one thing of the world: a company, a person, an order.
type Entity struct {
	// ID is the entity's identifier, unique in the world (required).
	ID string `json:"id"`
	// Type is a free-form kind ("company", "employee").
	Type string `json:"type,omitempty"`
	// Name is the display name.
	Name string `json:"name,omitempty"`
	// Attributes are the entity's facts; values are scalars written as text.
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Relation links two entities: subject —predicate→ object.
type Relation struct {
	Subject   string `json:"subject"`
	Predicate string `json:"predicate"`
	Object    string `json:"object"`
}

// Document is a text of the world (a web page, a report, a wiki article)
// that a search world returns and opens.
type Document struct {
	// ID identifies the document; defaults to its URL.
	ID    string `json:"id,omitempty"`
	URL   string `json:"url,omitempty"`
	Title string `json:"title,omitempty"`
	// Text is the document body (required).
	Text string `json:"text"`
	// About lists entity IDs the document talks about.
	About []string `json:"about,omitempty"`
}

// ErrInvalid wraps every malformed-fact error.
var ErrInvalid = errors.New("invalid fact")

// badFact is the error of a malformed fact at path; what identifies the
// fact (its id) is named in the message, since an index alone is hard to
// find in a long list.
func badFact(path, what, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if what != "" {
		msg += " (" + what + ")"
	}
	return fielderr.New(ErrInvalid, path, "%s", msg)
}

// Validate checks every fact and names the first malformed one.
func (f *Facts) Validate() error {
	if f == nil {
		return nil
	}
	ids := map[string]bool{}
	for i, e := range f.Entities {
		p, what := fielderr.Index("entities", i), "entity "+e.ID
		switch {
		case strings.TrimSpace(e.ID) == "":
			return badFact(p+".id", "", "missing")
		case strings.TrimSpace(e.ID) != e.ID:
			return badFact(p, what, "id has surrounding spaces")
		case ids[e.ID]:
			return badFact(p, what, "duplicate entity id")
		case e.Name == "" && len(e.Attributes) == 0:
			return badFact(p, what, "entity has neither a name nor attributes")
		}
		for k := range e.Attributes {
			if strings.TrimSpace(k) == "" {
				return badFact(p, what, "attribute with an empty name")
			}
		}
		ids[e.ID] = true
	}
	for i, r := range f.Relations {
		p, what := fielderr.Index("relations", i), fmt.Sprintf("relation %s %s %s", r.Subject, r.Predicate, r.Object)
		switch {
		case r.Subject == "" || r.Predicate == "" || r.Object == "":
			return badFact(p, what, "subject, predicate and object are all required")
		case !ids[r.Subject]:
			return badFact(p, what, "subject %q is not an entity id", r.Subject)
		case !ids[r.Object]:
			return badFact(p, what, "object %q is not an entity id", r.Object)
		}
	}
	if f.Retrieval != nil && (f.Retrieval.TopK < 0 || f.Retrieval.TopK > 100) {
		return badFact("retrieval.top_k", "", "%d: want 0 to 100", f.Retrieval.TopK)
	}
	docs := map[string]bool{}
	for i, d := range f.Documents {
		id := d.Key()
		p, what := fielderr.Index("documents", i), "document "+id
		switch {
		case id == "":
			return badFact(p, "", "needs an id or a url")
		case docs[id]:
			return badFact(p, what, "duplicate document id")
		case strings.TrimSpace(d.Text) == "":
			return badFact(p, what, "missing text")
		}
		for _, a := range d.About {
			if !ids[a] {
				return badFact(p+".about", what, "%q is not an entity id", a)
			}
		}
		docs[id] = true
	}
	return nil
}

// Key is the document's identifier: its ID, else its URL.
func (d Document) Key() string {
	if d.ID != "" {
		return d.ID
	}
	return d.URL
}

// Assertions lists the section's entity facts as ledger facts (source
// "spec"), so contradictions against the canon are found too.
func (f *Facts) Assertions() []Fact {
	if f == nil {
		return nil
	}
	var out []Fact
	for _, e := range f.Entities {
		if e.Name != "" {
			out = append(out, Fact{Entity: e.ID, Attribute: "name", Value: e.Name, Source: SourceSpec})
		}
		if e.Type != "" {
			out = append(out, Fact{Entity: e.ID, Attribute: "type", Value: e.Type, Source: SourceSpec})
		}
		for _, k := range sortedKeys(e.Attributes) {
			out = append(out, Fact{Entity: e.ID, Attribute: k, Value: e.Attributes[k], Source: SourceSpec})
		}
	}
	return out
}

// Render writes the section as text for the world model's initial state.
// The output is deterministic (attributes sorted) so the system prompt is
// byte-stable across sessions.
func (f *Facts) Render() string {
	if f == nil || (len(f.Entities) == 0 && len(f.Relations) == 0 && len(f.Documents) == 0) {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Facts of this world (canonical: every observation must agree with them)\n")
	if len(f.Entities) > 0 {
		b.WriteString("\n### Entities\n")
		for _, e := range f.Entities {
			b.WriteString("- " + e.ID)
			if e.Type != "" {
				b.WriteString(" [" + e.Type + "]")
			}
			if e.Name != "" {
				b.WriteString(" " + e.Name)
			}
			var attrs []string
			for _, k := range sortedKeys(e.Attributes) {
				attrs = append(attrs, k+": "+e.Attributes[k])
			}
			if len(attrs) > 0 {
				b.WriteString(" — " + strings.Join(attrs, "; "))
			}
			b.WriteByte('\n')
		}
	}
	if len(f.Relations) > 0 {
		b.WriteString("\n### Relations\n")
		for _, r := range f.Relations {
			fmt.Fprintf(&b, "- %s %s %s\n", r.Subject, r.Predicate, r.Object)
		}
	}
	if len(f.Documents) > 0 && f.Retrieval != nil {
		fmt.Fprintf(&b, "\n### Documents\nThe world holds %d documents about these entities, the only pages that exist. Those a search or an opened page reaches are given with each action; results and pages come from them.\n", len(f.Documents))
	} else if len(f.Documents) > 0 {
		b.WriteString("\n### Documents (the only pages that exist about these entities; search results and opened pages come from them)\n")
		for _, d := range f.Documents {
			b.WriteString("\n#### ")
			if d.Title != "" {
				b.WriteString(d.Title)
			} else {
				b.WriteString(d.Key())
			}
			b.WriteByte('\n')
			if d.URL != "" {
				b.WriteString("URL: " + d.URL + "\n")
			}
			b.WriteString(strings.TrimSpace(d.Text) + "\n")
		}
	}
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
