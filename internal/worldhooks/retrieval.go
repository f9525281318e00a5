package worldhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/agentworld/agentworld/internal/fiction"
	"github.com/agentworld/agentworld/internal/searchindex"
	"github.com/agentworld/agentworld/internal/sim"
)

// maxIndexedWorlds bounds the indexes a Retrieval hook keeps; past it the
// cache starts over (inline specs each get one, and a server may see
// many).
const maxIndexedWorlds = 256

// maxDocChars clips one retrieved document in the step's state text.
const maxDocChars = 4000

// RetrievedHeader opens the documents a step retrieved in its world state.
const RetrievedHeader = "## Documents this action reaches (full-text search over the world's documents; results and pages come only from these)"

// Retrieval answers a fictional world's search from a full-text index
// instead of the system prompt: for a world whose facts ask for
// retrieval, before each tool step it finds the documents the action
// reaches (an opened URL or id; else the best BM25 matches of the call's
// text arguments) and adds them to the step's world-state text.
type Retrieval struct {
	log *slog.Logger

	mu      sync.Mutex
	indexes map[string]*worldIndex // by LedgerWorld
}

type worldIndex struct {
	facts *fiction.Facts
	once  sync.Once
	ix    *searchindex.Index
	err   error
}

// NewRetrieval makes the hook; log may be nil.
func NewRetrieval(log *slog.Logger) *Retrieval {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Retrieval{log: log, indexes: map[string]*worldIndex{}}
}

var _ sim.StepHook = (*Retrieval)(nil)

// index is the world's index, built on first use.
func (h *Retrieval) index(s sim.SessionInfo) (*searchindex.Index, error) {
	key := LedgerWorld(s)
	h.mu.Lock()
	wi := h.indexes[key]
	if wi == nil || wi.facts != s.Spec.Facts {
		if len(h.indexes) >= maxIndexedWorlds {
			for k, old := range h.indexes {
				if old.ix != nil {
					old.ix.Close()
				}
				delete(h.indexes, k)
			}
		}
		wi = &worldIndex{facts: s.Spec.Facts}
		h.indexes[key] = wi
	}
	h.mu.Unlock()
	wi.once.Do(func() { wi.ix, wi.err = searchindex.New(wi.facts.Documents) })
	return wi.ix, wi.err
}

// BeforeStep implements sim.StepHook.
func (h *Retrieval) BeforeStep(ctx context.Context, s sim.SessionInfo, in *sim.StepInput) (*sim.Observation, error) {
	f := s.Spec.Facts
	if f == nil || f.Retrieval == nil || len(f.Documents) == 0 || in.Action.Tool == nil {
		return nil, nil
	}
	ix, err := h.index(s)
	if err != nil {
		h.log.Warn("search index unavailable; step runs without documents", "world", LedgerWorld(s), "err", err)
		return nil, nil
	}
	docs, err := Retrieve(ix, in.Action.Tool.Arguments, f.Retrieval.K())
	if err != nil {
		h.log.Warn("search failed; step runs without documents", "world", LedgerWorld(s), "err", err)
		return nil, nil
	}
	if len(docs) == 0 {
		return nil, nil
	}
	var b strings.Builder
	b.WriteString(RetrievedHeader)
	for _, d := range docs {
		b.WriteString("\n\n### ")
		if d.Title != "" {
			b.WriteString(d.Title)
		} else {
			b.WriteString(d.Key())
		}
		if d.URL != "" {
			b.WriteString("\nURL: " + d.URL)
		}
		t := strings.TrimSpace(d.Text)
		if len(t) > maxDocChars {
			t = t[:maxDocChars] + " …"
		}
		b.WriteString("\n" + t)
	}
	if in.WorldState != "" {
		in.WorldState += "\n\n"
	}
	in.WorldState += b.String()
	return nil, nil
}

// AfterStep implements sim.StepHook.
func (h *Retrieval) AfterStep(context.Context, sim.SessionInfo, sim.StepInput, sim.StepResult) {}

// Retrieve finds the documents a tool call reaches: the document whose URL
// or id a string argument names (an open_page call), else the top k BM25
// matches of the call's string arguments joined (a search).
func Retrieve(ix *searchindex.Index, args json.RawMessage, k int) ([]fiction.Document, error) {
	var m map[string]any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &m); err != nil {
			return nil, fmt.Errorf("arguments: %w", err)
		}
	}
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var texts []string
	for _, key := range keys {
		v, ok := m[key].(string)
		if !ok {
			continue
		}
		if d, ok := ix.Doc(strings.TrimSpace(v)); ok {
			return []fiction.Document{d}, nil
		}
		texts = append(texts, v)
	}
	hits, err := ix.Search(strings.Join(texts, " "), k)
	if err != nil {
		return nil, err
	}
	out := make([]fiction.Document, 0, len(hits))
	for _, h := range hits {
		if d, ok := ix.Doc(h.Key); ok {
			out = append(out, d)
		}
	}
	return out, nil
}
