package cli

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// Room sizes: past these, a file or a package is hard to hold in one's
// head, and usually holds more than one idea. Lines are counted as wc -l
// counts them (comments and blank lines included) over the non-test .go
// files; tests do not count.
const (
	maxFileLines    = 700
	maxPackageLines = 3000
)

// sizeReason is the paragraph of a package doc that says why a package or
// one of its files is larger: "Size: ..." naming each large file.
var sizeReason = regexp.MustCompile(`(?s)(?:^|\n\n)Size: (.+?)(?:\n\n|$)`)

// TestRoomSizes keeps every package under internal/ and its files within
// the room sizes, unless the package doc says why not in a "Size:"
// paragraph that names each file over the limit. A reason that no longer
// applies fails too, so the package docs stay true.
func TestRoomSizes(t *testing.T) {
	err := filepath.WalkDir("../../internal", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || d.Name() == "testdata" {
			return err
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			return err
		}
		total := 0
		var large []string
		sizes := map[string]int{}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			n := bytes.Count(b, []byte("\n"))
			if len(b) > 0 && b[len(b)-1] != '\n' {
				n++
			}
			total += n
			sizes[filepath.Base(f)] = n
			if n > maxFileLines {
				large = append(large, filepath.Base(f))
			}
		}
		if total == 0 {
			return nil
		}
		sort.Strings(large)
		reason := packageSizeReason(t, dir)
		rel := strings.TrimPrefix(dir, "../../")
		if reason == "" {
			if total > maxPackageLines {
				t.Errorf("%s: %d lines, over %d: split it by idea, or say why not in a \"Size:\" paragraph of its package doc", rel, total, maxPackageLines)
			}
			for _, f := range large {
				t.Errorf("%s/%s: %d lines, over %d: split it, or say why not in a \"Size:\" paragraph of the package doc naming it", rel, f, sizes[f], maxFileLines)
			}
			return nil
		}
		for _, f := range large {
			if !strings.Contains(reason, f) {
				t.Errorf("%s/%s: %d lines, over %d, and the package doc's \"Size:\" paragraph does not name it", rel, f, sizes[f], maxFileLines)
			}
		}
		if total <= maxPackageLines && len(large) == 0 {
			t.Errorf("%s: %d lines and no file over %d, but its package doc still explains a size (\"Size: %.60s\"): remove the paragraph", rel, total, maxFileLines, reason)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// packageSizeReason returns the "Size:" paragraph of the package doc of
// the non-test files in dir ("" when there is none).
func packageSizeReason(t *testing.T, dir string) string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			if f.Doc == nil {
				continue
			}
			if m := sizeReason.FindStringSubmatch(f.Doc.Text()); m != nil {
				return strings.Join(strings.Fields(m[1]), " ")
			}
		}
	}
	return ""
}

// TestSizeReasonParagraph pins what counts as a reason.
func TestSizeReasonParagraph(t *testing.T) {
	for doc, want := range map[string]string{
		"Package x does y.\n\nSize: big.go holds the grammar\nin one table.\n":      "big.go holds the grammar\nin one table.\n",
		"Package x does y.\n\nSize: a.go, b.go: one state machine.\n\nMore text.\n": "a.go, b.go: one state machine.",
		"Package x does y. Size: not a paragraph.\n":                                "",
	} {
		got := ""
		if m := sizeReason.FindStringSubmatch(doc); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("%q: got %q, want %q", doc, got, want)
		}
	}
}
