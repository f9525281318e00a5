package dataset

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
)

// templateID is the content hash of a template text: the first 12 hex
// digits of its SHA-256.
func templateID(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:6])
}

// ID is the version's content hash (12 hex digits of the SHA-256 of its
// text): two versions with one text share it, and an edited text under an
// old name gets a new one, so an export that records it says exactly which
// prompt it used.
func (t *Template) ID() string {
	if t.id == "" {
		return templateID(t.Text)
	}
	return t.id
}

// TemplatePin is the "name@id" form exports record; "" when name is "".
func TemplatePin(name, id string) string {
	if name == "" {
		return ""
	}
	return name + "@" + id
}

// checkLibrary checks parents and mixes: a parent names another version of
// the file and parents form no cycle; every mix names existing versions
// with finite weights > 0.
func (ts *TemplateSet) checkLibrary() error {
	byName := map[string]*Template{}
	for i := range ts.Templates {
		byName[ts.Templates[i].Name] = &ts.Templates[i]
	}
	for i := range ts.Templates {
		t := &ts.Templates[i]
		if t.Parent == "" {
			continue
		}
		if _, ok := byName[t.Parent]; !ok {
			return fmt.Errorf("%w: templates[%d] (%s): parent %q is not a version in the file", ErrBadTemplates, i, t.Name, t.Parent)
		}
		seen := map[string]bool{t.Name: true}
		for p := t.Parent; p != ""; p = byName[p].Parent {
			if seen[p] {
				return fmt.Errorf("%w: templates[%d] (%s): its parents form a cycle through %s", ErrBadTemplates, i, t.Name, p)
			}
			seen[p] = true
		}
	}
	for _, stage := range slices.Sorted(maps.Keys(ts.Mixes)) {
		mix := ts.Mixes[stage]
		if len(mix) == 0 {
			return fmt.Errorf("%w: mixes.%s is empty", ErrBadTemplates, stage)
		}
		for _, name := range slices.Sorted(maps.Keys(mix)) {
			if _, ok := byName[name]; !ok {
				return fmt.Errorf("%w: mixes.%s.%s: no such version", ErrBadTemplates, stage, name)
			}
			if w := mix[name]; !(w > 0) || w > 1e300 {
				return fmt.Errorf("%w: mixes.%s.%s: weight %v must be a finite number > 0", ErrBadTemplates, stage, name, w)
			}
		}
	}
	return nil
}

// Stage returns the versions the named stage's mix draws from, weighted
// by the mix, in file order. A file without mixes has no stages.
func (ts *TemplateSet) Stage(stage string) (*TemplateSet, error) {
	mix, ok := ts.Mixes[stage]
	if !ok {
		return nil, fmt.Errorf("%w: no mix for stage %q (the file has %v)", ErrBadTemplates, stage, slices.Sorted(maps.Keys(ts.Mixes)))
	}
	out := &TemplateSet{}
	for _, t := range ts.Templates {
		if w, ok := mix[t.Name]; ok {
			t.Weight = w
			out.Templates = append(out.Templates, t)
			out.total += w
		}
	}
	return out, nil
}

// ForStage is the set an export of stage draws from: the stage's mix when
// the file declares mixes, else the versions by their own weights.
func (ts *TemplateSet) ForStage(stage string) (*TemplateSet, error) {
	if len(ts.Mixes) == 0 {
		return ts, nil
	}
	return ts.Stage(stage)
}
