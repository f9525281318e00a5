package searchindex

import (
	"fmt"
	"testing"

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
