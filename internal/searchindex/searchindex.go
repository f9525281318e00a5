// Package searchindex is a full-text index over a fictional world's
// documents, ranked by BM25 (bleve's scorch index, held in memory): a
// search world answers a query from the few documents that match it
// instead of putting every document into the world model's prompt, so a
// world can hold thousands of documents.
package searchindex

import (
	"errors"
	"fmt"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/agentworld/agentworld/internal/fiction"
)

// DefaultLimit is the number of hits [Index.Search] returns when asked for
// 0.
const DefaultLimit = 5

// Index is a BM25 index over a set of documents. Safe for concurrent
// searches.
type Index struct {
	ix   bleve.Index
	docs map[string]fiction.Document // by key
	urls map[string]string           // URL → key
}

// Hit is one ranked result.
type Hit struct {
	// Key is the document's key ([fiction.Document.Key]).
	Key   string  `json:"key"`
	URL   string  `json:"url,omitempty"`
	Title string  `json:"title,omitempty"`
	Score float64 `json:"score"`
}

// field names of the indexed document.
const (
	fieldTitle = "title"
	fieldText  = "text"
)

// New indexes docs (their titles and texts, English analysis). Keys must
// be unique, as [fiction.Facts.Validate] requires.
func New(docs []fiction.Document) (*Index, error) {
	m := bleve.NewIndexMapping()
	m.ScoringModel = index.BM25Scoring
	m.DefaultAnalyzer = "en"
	dm := bleve.NewDocumentMapping()
	for _, f := range []string{fieldTitle, fieldText} {
		fm := mapping.NewTextFieldMapping()
		fm.Analyzer = "en"
		fm.Store = false
		fm.IncludeTermVectors = false
		dm.AddFieldMappingsAt(f, fm)
	}
	m.DefaultMapping = dm
	// scorch with no path keeps its segments in memory only; it is the
	// index type that computes BM25's field-length statistics.
	bi, err := bleve.NewUsing("", m, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, fmt.Errorf("search index: %w", err)
	}
	x := &Index{ix: bi, docs: make(map[string]fiction.Document, len(docs)), urls: map[string]string{}}
	b := bi.NewBatch()
	for _, d := range docs {
		k := d.Key()
		if k == "" {
			bi.Close()
			return nil, errors.New("search index: a document without an id or url")
		}
		if _, dup := x.docs[k]; dup {
			bi.Close()
			return nil, fmt.Errorf("search index: duplicate document %q", k)
		}
		x.docs[k] = d
		if d.URL != "" {
			x.urls[d.URL] = k
		}
		if err := b.Index(k, map[string]any{fieldTitle: d.Title, fieldText: d.Text}); err != nil {
			bi.Close()
			return nil, fmt.Errorf("search index: document %q: %w", k, err)
		}
	}
	if err := bi.Batch(b); err != nil {
		bi.Close()
		return nil, fmt.Errorf("search index: %w", err)
	}
	return x, nil
}

// Len is the number of documents indexed.
func (x *Index) Len() int { return len(x.docs) }

// Search returns up to limit documents ranked by BM25 over title and text
// for a free-text query (any of its words may match; the title counts
// double). limit 0 means [DefaultLimit]. An empty query finds nothing.
func (x *Index) Search(q string, limit int) ([]Hit, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	if strings.TrimSpace(q) == "" {
		return nil, nil
	}
	title := bleve.NewMatchQuery(q)
	title.SetField(fieldTitle)
	title.SetBoost(2)
	text := bleve.NewMatchQuery(q)
	text.SetField(fieldText)
	req := bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery([]query.Query{title, text}...), limit, 0, false)
	res, err := x.ix.Search(req)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", q, err)
	}
	hits := make([]Hit, 0, len(res.Hits))
	for _, h := range res.Hits {
		d := x.docs[h.ID]
		hits = append(hits, Hit{Key: h.ID, URL: d.URL, Title: d.Title, Score: h.Score})
	}
	return hits, nil
}

// Doc finds a document by its key or URL (the target of an open_page call).
func (x *Index) Doc(keyOrURL string) (fiction.Document, bool) {
	if d, ok := x.docs[keyOrURL]; ok {
		return d, true
	}
	if k, ok := x.urls[keyOrURL]; ok {
		return x.docs[k], true
	}
	return fiction.Document{}, false
}

// Close releases the index.
func (x *Index) Close() error { return x.ix.Close() }
