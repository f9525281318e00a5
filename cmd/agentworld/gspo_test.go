package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gspoFixture is testdata/gspo.json: for each trainer the manual walks
// through, the configuration that selects GSPO, as read from the trainer's
// source at a named commit.
type gspoFixture struct {
	Note     string `json:"note"`
	Trainers []struct {
		Name   string   `json:"name"`
		Source []string `json:"source"`
		// Anchor picks the manual's code blocks that configure this
		// trainer: every fenced block holding it must set Settings.
		Anchor string `json:"anchor"`
		// Style is how a setting is written: hydra (key=value), flags
		// (--key value) or kwargs (key=value in a Python call).
		Style    string            `json:"style"`
		Settings map[string]string `json:"settings"`
	} `json:"trainers"`
}

// fencedBlocks returns the bodies of md's fenced code blocks, any language.
func fencedBlocks(md string) []string {
	var out []string
	var cur []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			if in {
				out = append(out, strings.Join(cur, "\n"))
				cur = nil
			}
			in = !in
			continue
		}
		if in {
			cur = append(cur, line)
		}
	}
	return out
}

// settingValues returns every value block gives key, written in style.
func settingValues(block, style, key string, words int) []string {
	var re *regexp.Regexp
	k := regexp.QuoteMeta(key)
	switch style {
	case "hydra":
		re = regexp.MustCompile(`(?:^|[\s'"])` + k + `=([^\s'"\\]+)`)
	case "flags":
		re = regexp.MustCompile(`(?:^|\s)` + k + `(?:=|\s+)(\S+` + strings.Repeat(`\s+\S+`, max(words-1, 0)) + `)`)
	case "kwargs":
		re = regexp.MustCompile(`(?:^|[\s(,])` + k + `\s*=\s*([^,)\n]+)`)
	default:
		panic("unknown style " + style)
	}
	var vals []string
	for _, m := range re.FindAllStringSubmatch(block, -1) {
		vals = append(vals, strings.Join(strings.Fields(strings.TrimSpace(m[1])), " "))
	}
	return vals
}

// gspoMismatches lists how block differs from settings: a key missing,
// or set (anywhere in the block) to another value.
func gspoMismatches(block, style string, settings map[string]string) []string {
	var out []string
	for key, want := range settings {
		vals := settingValues(block, style, key, len(strings.Fields(want)))
		if len(vals) == 0 {
			out = append(out, key+" is not set")
		}
		for _, v := range vals {
			if v != want {
				out = append(out, fmt.Sprintf("%s=%s, the trainer's GSPO is %s", key, v, want))
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestDocsGSPO: every code block of the manual that starts a trainer the
// fixture names configures GSPO exactly as the fixture, read from that
// trainer's source, spells it, and each trainer is walked through at least
// once.
func TestDocsGSPO(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "gspo.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f gspoFixture
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs pages: %v", err)
	}
	blocks := map[string][]string{} // page -> blocks
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		blocks[filepath.Base(p)] = fencedBlocks(string(b))
	}
	for _, tr := range f.Trainers {
		if len(tr.Source) == 0 || len(tr.Settings) == 0 {
			t.Errorf("%s: the fixture names no source or settings", tr.Name)
		}
		found := 0
		for page, bs := range blocks {
			for _, b := range bs {
				if !strings.Contains(b, tr.Anchor) {
					continue
				}
				found++
				if d := gspoMismatches(b, tr.Style, tr.Settings); len(d) > 0 {
					t.Errorf("docs/%s: the %s block (%q) does not configure GSPO as %s's source does:\n%s",
						page, tr.Name, tr.Anchor, tr.Name, strings.Join(d, "\n"))
				}
			}
		}
		if found == 0 {
			t.Errorf("no docs block holds %q: the %s GSPO walkthrough is missing", tr.Anchor, tr.Name)
		}
	}
}

// TestGSPOMismatches: the block reader finds each style's settings and
// reports a missing key and a different value.
func TestGSPOMismatches(t *testing.T) {
	for _, c := range []struct {
		style, block string
		settings     map[string]string
		want         []string
	}{
		{"hydra", "python3 -m x a.b=gspo \\\n  c=3e-4", map[string]string{"a.b": "gspo", "c": "3e-4"}, nil},
		{"hydra", "python3 -m x a.b=vanilla", map[string]string{"a.b": "gspo"}, []string{"a.b=vanilla, the trainer's GSPO is gspo"}},
		{"hydra", "python3 -m x", map[string]string{"a.b": "gspo"}, []string{"a.b is not set"}},
		{"flags", "x --clip 3e-4 4e-4 --loss gspo", map[string]string{"--clip": "3e-4 4e-4", "--loss": "gspo"}, nil},
		{"flags", "x --clip 0.2 0.2", map[string]string{"--clip": "3e-4 4e-4"}, []string{"--clip=0.2 0.2, the trainer's GSPO is 3e-4 4e-4"}},
		{"kwargs", "GRPOConfig(level=\"sequence\",\n    eps=3e-4)", map[string]string{"level": `"sequence"`, "eps": "3e-4"}, nil},
		{"kwargs", "GRPOConfig(level=\"token\")", map[string]string{"level": `"sequence"`}, []string{`level="token", the trainer's GSPO is "sequence"`}},
	} {
		if d := cmp.Diff(c.want, gspoMismatches(c.block, c.style, c.settings)); d != "" {
			t.Errorf("%s %q: %s", c.style, c.block, d)
		}
	}
}
