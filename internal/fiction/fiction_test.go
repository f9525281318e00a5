package fiction

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestExtract(t *testing.T) {
	tests := []struct {
		name string
		obs  string
		want []Assertion
	}{
		{"json object with id", `{"id":"usr_8f2k","name":"Mara Lindqvist","title":"CTO","active":true,"updated_at":"2024-01-01"}`, []Assertion{
			{"usr_8f2k", "active", "true"}, {"usr_8f2k", "name", "Mara Lindqvist"}, {"usr_8f2k", "title", "CTO"},
		}},
		{"numeric ids qualified by parent key", `{"issues":[{"number_id":12,"title":"Crash"},{"id":7,"title":"Typo","labels":["a"]}]}`, []Assertion{
			{"issue#12", "title", "Crash"}, {"issue#7", "title", "Typo"},
		}},
		{"numeric id qualified by type", `{"id": 3, "type": "Order", "total": 19.90}`, []Assertion{
			{"order#3", "total", "19.90"}, {"order#3", "type", "Order"},
		}},
		{"nested object without id is dotted", `{"id":"c-1","address":{"city":"Brno","zip":"60200"}}`, []Assertion{
			{"c-1", "address.city", "Brno"}, {"c-1", "address.zip", "60200"},
		}},
		{"nested entity", `{"id":"o-1","customer":{"customer_id":"cu-9","name":"Ivo"}}`, []Assertion{
			{"cu-9", "name", "Ivo"},
		}},
		{"mcp text wrapper", `{"content":[{"type":"text","text":"{\"id\":\"proj-4\",\"owner\":\"Lena\"}"}],"isError":false}`, []Assertion{
			{"proj-4", "owner", "Lena"},
		}},
		{"json inside prose", "Created the record:\n```json\n{\"sku\": \"QF-100\", \"price\": 12}\n```\nDone.", []Assertion{
			{"QF-100", "price", "12"},
		}},
		{"key value lines", "Employee ID: E-1042\nFull Name: Tomas Berg\nDepartment: Finance\nLast seen: 3 minutes ago\n\nNo id here: x\nColor: red", []Assertion{
			{"E-1042", "full_name", "Tomas Berg"}, {"E-1042", "department", "Finance"}, {"E-1042", "last_seen", "3 minutes ago"},
		}},
		{"numeric line id", "- Order ID: 5531\n- Status: shipped", []Assertion{{"order_id#5531", "status", "shipped"}}},
		{"paid is not an id", `{"paid": "yes", "amount": 3}`, nil},
		{"terminal screen", "root@box:~# ls [abc]\nfoo  bar\nroot@box:~# ", nil},
		{"long values skipped", `{"id":"x","bio":"` + strings.Repeat("a", 200) + `","n":"1"}`, []Assertion{{"x", "n", "1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Extract(tc.obs)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFactsValidate(t *testing.T) {
	ok := `{"entities":[{"id":"acme","type":"company","name":"Acme","attributes":{"founded":"2011"}},{"id":"e1","name":"Ann"}],
		"relations":[{"subject":"e1","predicate":"works_at","object":"acme"}],
		"documents":[{"url":"https://acme.example/about","title":"About","text":"Acme makes things.","about":["acme"]}]}`
	tests := []struct {
		name, facts, want string
	}{
		{"valid", ok, ""},
		{"missing id", `{"entities":[{"name":"x"}]}`, "field entities[0].id: missing"},
		{"duplicate", `{"entities":[{"id":"a","name":"x"},{"id":"a","name":"y"}]}`, "field entities[1]: duplicate entity id (entity a)"},
		{"empty entity", `{"entities":[{"id":"a"}]}`, "field entities[0]: entity has neither a name nor attributes (entity a)"},
		{"dangling relation", `{"entities":[{"id":"a","name":"x"}],"relations":[{"subject":"a","predicate":"owns","object":"b"}]}`, `field relations[0]: object "b" is not an entity id (relation a owns b)`},
		{"incomplete relation", `{"entities":[{"id":"a","name":"x"}],"relations":[{"subject":"a","object":"a"}]}`, "relations[0]"},
		{"doc without text", `{"documents":[{"url":"u"}]}`, "field documents[0]: missing text (document u)"},
		{"doc without key", `{"documents":[{"text":"t"}]}`, "field documents[0]: needs an id or a url"},
		{"doc about unknown", `{"documents":[{"id":"d","text":"t","about":["zz"]}]}`, `field documents[0].about: "zz" is not an entity id (document d)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f Facts
			if err := json.Unmarshal([]byte(tc.facts), &f); err != nil {
				t.Fatal(err)
			}
			err := f.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
	var f Facts
	_ = json.Unmarshal([]byte(ok), &f)
	r := f.Render()
	for _, want := range []string{"- acme [company] Acme — founded: 2011", "- e1 works_at acme", "URL: https://acme.example/about", "Acme makes things."} {
		if !strings.Contains(r, want) {
			t.Errorf("render lacks %q:\n%s", want, r)
		}
	}
	if r != f.Render() {
		t.Error("render is not deterministic")
	}
}

// TestTwoSessionsShareFacts: a fact invented in session A reaches session
// B's state text; B's own facts are left out of B's state; a planted
// contradiction is found.
func TestTwoSessionsShareFacts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := NewFileStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLedger(store, &LedgerOptions{Now: func() time.Time { return time.Unix(0, 0) }})
	rec, err := l.Observe(ctx, "quillfern", "A", 1, `{"id":"emp-77","name":"Odile Varga","title":"Head of Research"}`)
	if err != nil || len(rec) != 2 {
		t.Fatalf("recorded %v, %v", rec, err)
	}
	// Repeating a known value records nothing.
	if rec, _ := l.Observe(ctx, "quillfern", "A", 2, `{"id":"emp-77","title":"Head of Research"}`); len(rec) != 0 {
		t.Errorf("repeat recorded %v", rec)
	}
	stateB, err := l.StateText(ctx, "quillfern", "B")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stateB, "emp-77") || !strings.Contains(stateB, "title: Head of Research") {
		t.Fatalf("session B state lacks A's fact:\n%s", stateB)
	}
	if s, _ := l.StateText(ctx, "quillfern", "A"); s != "" {
		t.Errorf("session A is shown its own facts:\n%s", s)
	}
	if s, _ := l.StateText(ctx, "other-world", "B"); s != "" {
		t.Errorf("another world sees quillfern facts:\n%s", s)
	}
	// Within-session change: a transition, not a contradiction.
	_, _ = l.Observe(ctx, "quillfern", "A", 3, `{"id":"emp-77","title":"Chief Scientist"}`)
	// Planted contradiction from session B.
	_, _ = l.Observe(ctx, "quillfern", "B", 1, "Employee ID: emp-77\nTitle: Janitor")
	canon := &Facts{Entities: []Entity{{ID: "emp-77", Name: "Odile Varga", Attributes: map[string]string{"office": "Lyon"}}}}
	_, _ = l.Observe(ctx, "quillfern", "C", 1, `{"id":"emp-77","office":"Oslo"}`)

	// A fresh ledger over the same files sees the same history.
	l2 := NewLedger(mustStore(t, dir), nil)
	got, err := l2.Contradictions(ctx, "quillfern", canon)
	if err != nil {
		t.Fatal(err)
	}
	want := []Contradiction{
		{Entity: "emp-77", Attribute: "title", Was: Claim{"Chief Scientist", "A", 3, SourceObservation}, Now: Claim{"Janitor", "B", 1, SourceObservation}},
		{Entity: "emp-77", Attribute: "office", Was: Claim{"Lyon", "", 0, SourceSpec}, Now: Claim{"Oslo", "C", 1, SourceObservation}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func mustStore(t *testing.T, dir string) *FileStore {
	t.Helper()
	s, err := NewFileStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFileStoreSkipsTornLine(t *testing.T) {
	ctx := context.Background()
	s := mustStore(t, t.TempDir())
	if err := s.AppendFacts(ctx, "w/../x", []Fact{{Entity: "a", Attribute: "b", Value: "c", Source: SourceObservation}}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Path("w/../x"), s.dir) || strings.Contains(strings.TrimPrefix(s.Path("w/../x"), s.dir), "/../") {
		t.Fatalf("world name escapes the directory: %s", s.Path("w/../x"))
	}
	f, _ := os.OpenFile(s.Path("w/../x"), os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(`{"entity":"torn`)
	f.Close()
	got, err := s.WorldFacts(ctx, "w/../x")
	if err != nil || len(got) != 1 {
		t.Fatalf("got %v, %v", got, err)
	}
	// The next append starts a line of its own instead of extending the
	// torn one.
	if err := s.AppendFacts(ctx, "w/../x", []Fact{{Entity: "d", Attribute: "e", Value: "f", Source: SourceObservation}}); err != nil {
		t.Fatal(err)
	}
	got, err = s.WorldFacts(ctx, "w/../x")
	if err != nil || len(got) != 2 || got[1].Entity != "d" {
		t.Fatalf("after a torn line: got %v, %v", got, err)
	}
}

func TestStateTextBudget(t *testing.T) {
	ctx := context.Background()
	l := NewLedger(&MemStore{}, &LedgerOptions{MaxStateChars: 300})
	for i := 0; i < 40; i++ {
		obs, _ := json.Marshal(map[string]any{"id": "ent-" + string(rune('a'+i%26)) + string(rune('a'+i/26)), "value": i})
		if _, err := l.Observe(ctx, "w", "A", i+1, string(obs)); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := l.StateText(ctx, "w", "B")
	if len(s) > 300 || !strings.Contains(s, "value: 39") || strings.Contains(s, "value: 0;") {
		t.Errorf("budgeted state (%d chars) should keep the latest entities:\n%s", len(s), s)
	}
}

// FuzzExtract: extraction of arbitrary observations must not panic and
// must only return complete, bounded facts.
func FuzzExtract(f *testing.F) {
	f.Add(`{"id":"a","x":{"y":[1,{"user_id":"u","n":"v"}]}}`)
	f.Add("Order ID: 5\nStatus: ok\n\n{\"content\":[{\"text\":\"{\\\"id\\\":1}\"}]}")
	f.Add("[[[[{{{{\"")
	f.Fuzz(func(t *testing.T, s string) {
		for _, a := range Extract(s) {
			if a.Entity == "" || a.Attribute == "" || a.Value == "" || len(a.Value) > maxValueLen {
				t.Fatalf("bad assertion %+v", a)
			}
		}
	})
}

// TestLedgerFileNamesAreDistinct: names that the code-point escaping of
// earlier versions mapped to one file (".41" and U+2E41 both gave %2E41)
// now get files of their own, ASCII names keep their old file, and a ledger
// under its old name is adopted on first use.
func TestLedgerFileNamesAreDistinct(t *testing.T) {
	for _, pair := range [][2]string{{".41", "\u2e41"}, {"é", "%C3%A9"}, {"a b", "a%20b"}} {
		if fileName(pair[0]) == fileName(pair[1]) {
			t.Errorf("%q and %q share the file %s", pair[0], pair[1], fileName(pair[0]))
		}
	}
	for _, w := range []string{"quillfern", "a.b/c", "w/../x", ""} {
		if fileName(w) != legacyFileName(w) {
			t.Errorf("ASCII name %q moved from %s to %s", w, legacyFileName(w), fileName(w))
		}
	}
	ctx := context.Background()
	dir := t.TempDir()
	s := mustStore(t, dir)
	world := "Ærøskøbing"
	legacy := dir + "/" + legacyFileName(world) + ".facts.jsonl"
	if err := os.WriteFile(legacy, []byte(`{"entity":"ferry","attribute":"departs","value":"07:10","source":"observation"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := s.WorldFacts(ctx, world)
	if err != nil || len(got) != 1 || got[0].Value != "07:10" {
		t.Fatalf("facts under the old file name: %v, %v", got, err)
	}
	// Reading (world check) never renames: by the old escaping the file
	// may be another world's.
	if _, err := os.Stat(legacy); err != nil {
		t.Errorf("a read moved the old file: %v", err)
	}
	if err := s.AppendFacts(ctx, world, []Fact{{Entity: "ferry", Attribute: "arrives", Value: "08:00", Source: SourceObservation}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old file is still there after a write: %v", err)
	}
	if got, err := s.WorldFacts(ctx, world); err != nil || len(got) != 2 {
		t.Fatalf("after an append: %v, %v", got, err)
	}
}
