package searchindex

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentworld/agentworld/internal/fiction"
)

func TestSearchRanksTheMatchingDocumentFirst(t *testing.T) {
	docs := []fiction.Document{
		{URL: "https://q.example/about", Title: "About Quillfern Instruments", Text: "Quillfern was founded in 2011 in Tarnow and makes spectrometers."},
		{URL: "https://q.example/lumen-3", Title: "Lumen 3 field spectrometer", Text: "Lumen 3 weighs 2.1 kg and lists at EUR 18,400."},
		{URL: "https://news.example/funding", Title: "Quillfern raises a Series B", Text: "A EUR 30 million round led by Vistula Ventures."},
	}
	for i := range 50 { // filler that shares common words
		docs = append(docs, fiction.Document{ID: fmt.Sprintf("filler-%d", i), Title: "Notes", Text: "The company makes instruments in a factory."})
	}
	x, err := New(docs)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for q, want := range map[string]string{
		"Lumen 3 weight":             "https://q.example/lumen-3",
		"who led the Series B":       "https://news.example/funding",
		"when was Quillfern founded": "https://q.example/about",
	} {
		hits, err := x.Search(q, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].URL != want {
			t.Errorf("Search(%q) = %+v, want %s first", q, hits, want)
		}
	}
	if d, ok := x.Doc("https://q.example/lumen-3"); !ok || d.Title != "Lumen 3 field spectrometer" {
		t.Errorf("Doc by URL = %+v, %v", d, ok)
	}
	if hits, _ := x.Search("  ", 3); len(hits) != 0 {
		t.Errorf("an empty query found %v", hits)
	}
}

func TestDuplicateKeyRefused(t *testing.T) {
	_, err := New([]fiction.Document{{ID: "a", Text: "x"}, {ID: "a", Text: "y"}})
	if err == nil {
		t.Fatal("duplicate keys accepted")
	}
}

func TestAnalyze(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"Quillfern's founders", []string{"quillfern", "founder"}},
		{"Quillfern\u2019s LUMEN", []string{"quillfern", "lumen"}},
		{"the company was founded in 2011", []string{"compani", "found", "2011"}},
		{"spectrometers, weighing 2.1 kg!", []string{"spectromet", "weigh", "2.1", "kg"}},
		{"Zürich  café", []string{"zürich", "café"}},
		{"who, what, when?", nil},
		{"", nil},
	} {
		if diff := cmp.Diff(tc.want, analyze(tc.text)); diff != "" {
			t.Errorf("analyze(%q) (-want +got):\n%s", tc.text, diff)
		}
	}
}

func TestSearchScoring(t *testing.T) {
	docs := []fiction.Document{
		{ID: "text", Title: "Report", Text: "A note on the harbour."},
		{ID: "title", Title: "Harbour", Text: "A note on the report."},
		{ID: "twin-a", Title: "Mill", Text: "The old mill by the river."},
		{ID: "twin-b", Title: "Mill", Text: "The old mill by the river."},
		{ID: "other", Title: "Bakery", Text: "Bread and cakes."},
	}
	x, err := New(docs)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(q string, limit int) []string {
		hits, err := x.Search(q, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hits {
			out = append(out, h.Key)
		}
		return out
	}
	for _, tc := range []struct {
		q     string
		limit int
		want  []string
	}{
		{"harbour", 0, []string{"title", "text"}},       // a title match counts double
		{"river mill", 0, []string{"twin-a", "twin-b"}}, // equal scores keep the documents' order
		{"river mill", 1, []string{"twin-a"}},
		{"the of and", 0, nil}, // stop words only
		{"submarine", 0, nil},
	} {
		if diff := cmp.Diff(tc.want, keys(tc.q, tc.limit)); diff != "" {
			t.Errorf("Search(%q, %d) (-want +got):\n%s", tc.q, tc.limit, diff)
		}
	}
	if x.Len() != len(docs) {
		t.Errorf("Len = %d, want %d", x.Len(), len(docs))
	}
}

func TestEmptyIndex(t *testing.T) {
	x, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if hits, err := x.Search("anything", 3); err != nil || len(hits) != 0 {
		t.Errorf("Search on an empty index = %v, %v", hits, err)
	}
}

// FuzzSearch indexes and searches arbitrary text: no panic, scores positive
// and in order, never more hits than asked.
func FuzzSearch(f *testing.F) {
	f.Add("Quillfern's Lumen 3", "lumen", "weighs 2.1 kg")
	f.Add("\xff\xfe'", "'s", "ｓ＇s")
	f.Fuzz(func(t *testing.T, title, q, text string) {
		x, err := New([]fiction.Document{{ID: "a", Title: title, Text: text}, {ID: "b", Title: text, Text: q}})
		if err != nil {
			t.Fatal(err)
		}
		hits, err := x.Search(q, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) > 1 {
			t.Fatalf("%d hits for limit 1", len(hits))
		}
		for _, h := range hits {
			if !(h.Score > 0) {
				t.Fatalf("hit %+v has no positive score", h)
			}
		}
	})
}
