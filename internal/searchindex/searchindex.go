// Package searchindex is a full-text index over a fictional world's
// documents, ranked by BM25 and held in memory: a search world answers a
// query from the few documents that match it instead of putting every
// document into the world model's prompt, so a world can hold thousands of
// documents.
//
// Text is analysed for English: split into words by Unicode's word-boundary
// rules (UAX #29, github.com/blevesearch/segment), a possessive 's dropped,
// lower-cased, common function words dropped, and Porter-stemmed
// (github.com/blevesearch/go-porterstemmer) — the analysis of bleve's "en"
// analyzer, whose in-memory index this package used before. The index
// itself is a map from term to postings per field: a world's documents are
// few enough to score every posting of every query term, and bleve cost
// the binary about 12 MB (its own 5.7 MB and, through its JSON library's
// reflection, the linker's pruning of unused methods everywhere else; see
// docs/deployment.md).
package searchindex

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	porterstemmer "github.com/blevesearch/go-porterstemmer"
	"github.com/blevesearch/segment"

	"github.com/agentworld/agentworld/internal/fiction"
)

// DefaultLimit is the number of hits [Index.Search] returns when asked for
// 0.
const DefaultLimit = 5

// BM25's parameters, the usual ones (Lucene's and bleve's): k1 bounds how
// much a term's repetition in one document counts, b how much a long field
// is discounted.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Index is a BM25 index over a set of documents. It is not changed after
// [New], so concurrent searches are safe.
type Index struct {
	docs   map[string]fiction.Document // by key
	urls   map[string]string           // URL → key
	keys   []string                    // document number → key, in the order given to New
	fields [2]field                    // title, text
}

// field is one indexed field: the postings of each term and every
// document's length in terms, for BM25's length normalisation.
type field struct {
	boost    float64
	postings map[string][]posting
	lens     []int // by document number
	avgLen   float64
}

// posting is one document's count of a term.
type posting struct {
	doc int
	tf  int
}

// Hit is one ranked result.
type Hit struct {
	// Key is the document's key ([fiction.Document.Key]).
	Key   string  `json:"key"`
	URL   string  `json:"url,omitempty"`
	Title string  `json:"title,omitempty"`
	Score float64 `json:"score"`
}

// Field boosts: a query word in a title counts double.
const (
	titleBoost = 2
	textBoost  = 1
)

// New indexes docs (their titles and texts, English analysis). Keys must
// be unique, as [fiction.Facts.Validate] requires.
func New(docs []fiction.Document) (*Index, error) {
	x := &Index{
		docs: make(map[string]fiction.Document, len(docs)),
		urls: map[string]string{},
		keys: make([]string, 0, len(docs)),
	}
	x.fields[0] = field{boost: titleBoost, postings: map[string][]posting{}}
	x.fields[1] = field{boost: textBoost, postings: map[string][]posting{}}
	for _, d := range docs {
		k := d.Key()
		if k == "" {
			return nil, errors.New("search index: a document without an id or url")
		}
		if _, dup := x.docs[k]; dup {
			return nil, fmt.Errorf("search index: duplicate document %q", k)
		}
		x.docs[k] = d
		if d.URL != "" {
			x.urls[d.URL] = k
		}
		n := len(x.keys)
		x.keys = append(x.keys, k)
		x.fields[0].add(n, d.Title)
		x.fields[1].add(n, d.Text)
	}
	for i := range x.fields {
		f := &x.fields[i]
		total := 0
		for _, l := range f.lens {
			total += l
		}
		if len(f.lens) > 0 {
			f.avgLen = float64(total) / float64(len(f.lens))
		}
	}
	return x, nil
}

// add indexes document n's text in f.
func (f *field) add(n int, text string) {
	terms := analyze(text)
	f.lens = append(f.lens, len(terms))
	counts := map[string]int{}
	for _, t := range terms {
		counts[t]++
	}
	for t, c := range counts {
		f.postings[t] = append(f.postings[t], posting{doc: n, tf: c})
	}
}

// Len is the number of documents indexed.
func (x *Index) Len() int { return len(x.docs) }

// Search returns up to limit documents ranked by BM25 over title and text
// for a free-text query (any of its words may match; the title counts
// double); equal scores keep the documents' order. limit 0 means
// [DefaultLimit]. An empty query finds nothing.
func (x *Index) Search(q string, limit int) ([]Hit, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	terms := analyze(q)
	if len(terms) == 0 {
		return nil, nil
	}
	slices.Sort(terms)
	terms = slices.Compact(terms)
	n := float64(len(x.keys))
	scores := map[int]float64{}
	for i := range x.fields {
		f := &x.fields[i]
		if f.avgLen == 0 {
			continue
		}
		for _, t := range terms {
			ps := f.postings[t]
			if len(ps) == 0 {
				continue
			}
			df := float64(len(ps))
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			for _, p := range ps {
				tf := float64(p.tf)
				norm := 1 - bm25B + bm25B*float64(f.lens[p.doc])/f.avgLen
				scores[p.doc] += f.boost * idf * tf * (bm25K1 + 1) / (tf + bm25K1*norm)
			}
		}
	}
	ranked := make([]int, 0, len(scores))
	for doc := range scores {
		ranked = append(ranked, doc)
	}
	slices.SortFunc(ranked, func(a, b int) int {
		if c := cmp.Compare(scores[b], scores[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	if len(ranked) > limit {
		ranked = ranked[:limit]
	}
	hits := make([]Hit, 0, len(ranked))
	for _, doc := range ranked {
		k := x.keys[doc]
		d := x.docs[k]
		hits = append(hits, Hit{Key: k, URL: d.URL, Title: d.Title, Score: scores[doc]})
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

// Close releases the index. It holds nothing but memory, so it only exists
// for callers that treat the index as a resource.
func (x *Index) Close() error { return nil }

// analyze turns text into index terms: its words (letters, numbers and
// ideographs by UAX #29; punctuation and spaces are not words), each with
// a trailing possessive 's dropped, lower-cased, stop words dropped, and
// stemmed.
func analyze(text string) []string {
	var terms []string
	seg := segment.NewWordSegmenterDirect([]byte(text))
	for seg.Segment() {
		if seg.Type() == segment.None {
			continue
		}
		w := strings.ToLower(dropPossessive(seg.Text()))
		if w == "" || stopWords[w] {
			continue
		}
		terms = append(terms, string(porterstemmer.StemWithoutLowerCasing([]rune(w))))
	}
	return terms
}

// dropPossessive removes a final 's (with a straight, typographic or
// full-width apostrophe): "Quillfern's" is "Quillfern".
func dropPossessive(w string) string {
	last, n := utf8.DecodeLastRuneInString(w)
	if unicode.ToLower(last) != 's' {
		return w
	}
	prev, m := utf8.DecodeLastRuneInString(w[:len(w)-n])
	switch prev {
	case '\'', '\u2019', '\uff07':
		return w[:len(w)-n-m]
	}
	return w
}

// stopWords are English function words, too common to tell documents
// apart; a query of only these finds nothing.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but nor if then else so
		of in on at to from by for with without into onto about over under
		as than that this these those there here
		is are was were be been being am do does did has have had
		it its he him his she her they them their we us our you your i me my
		not no will would shall should can could may might must
		what which who whom whose when where why how`) {
		m[w] = true
	}
	return m
}()
