package promptlib

import (
	"errors"
	"fmt"
	"math/bits"
	"regexp"
	"strings"
	"sync"

	"github.com/agentworld/agentworld/internal/domain"
)

// ErrNotDecomposable reports a rendered system prompt whose components
// cannot be recovered, so it cannot be rendered again under another
// version.
var ErrNotDecomposable = errors.New("system prompt cannot be split into its components")

// Parts are the five components of a system prompt as text, the
// demonstrations already rendered: what [Decompose] recovers and
// [Version.RenderParts] renders.
type Parts = domain.WorldPromptParts

// field numbers the components inside a skeleton.
type field int

const (
	fTask field = iota
	fAction
	fInitial
	fDemos
	fSim
	nFields
)

var fieldNames = [nFields]string{"task description", "action space", "initial state", "demonstrations", "simulation instruction"}

func (f field) get(p *Parts) *string {
	return [nFields]*string{&p.TaskDescription, &p.ActionSpace, &p.InitialState, &p.Demonstrations, &p.SimulationInstruction}[f]
}

// skeleton is one way a template renders: the literal text around the
// components that are present, as a regular expression with one group per
// place a component is written.
type skeleton struct {
	re     *regexp.Regexp
	groups []field
	// lits is the literal text between the components, in order; a
	// prompt that lacks one of them in order cannot match, which is much
	// cheaper to find out than running re.
	lits []string
}

// plausible reports whether the literals occur in system in order, the
// first as its prefix and the last as its suffix.
func (sk *skeleton) plausible(system string) bool {
	n := len(sk.lits)
	if n == 1 {
		return system == sk.lits[0]
	}
	if !strings.HasPrefix(system, sk.lits[0]) || !strings.HasSuffix(system, sk.lits[n-1]) {
		return false
	}
	rest := system[len(sk.lits[0]):]
	for _, l := range sk.lits[1 : n-1] {
		i := strings.Index(rest, l)
		if i < 0 {
			return false
		}
		rest = rest[i+len(l):]
	}
	return len(rest) >= len(sk.lits[n-1])
}

// sentinel marks where component f lands in a rendered skeleton. NUL
// bytes never appear in a template's own text, and the bytes around them
// survive the renderer's trimming.
func sentinel(f field) string { return fmt.Sprintf("\x00\x01%d\x01\x00", f) }

var sentinelRE = regexp.MustCompile("\x00\x01([0-9])\x01\x00")

// masks lists the subsets of components, more components first: a prompt
// two subsets render alike (an action space that ends in the initial
// state's heading) is read the way that recognises the most structure.
var masks = func() []int {
	var out []int
	for n := nFields; n >= 0; n-- {
		for m := 0; m < 1<<nFields; m++ {
			if bits.OnesCount(uint(m)) == int(n) {
				out = append(out, m)
			}
		}
	}
	return out
}()

// skeletons lists the shapes of v's template for d: one per subset of
// present components (a template may leave a heading out when its
// component is empty), skipping subsets in which a present component is
// never written (the subset without it has the same text). An empty
// simulation instruction renders the template's default rules.
func skeletons(v *Version, d domain.Domain) []*skeleton {
	t, ok := v.parsed[d]
	if !ok {
		return nil
	}
	var out []*skeleton
	seen := map[string]bool{}
	for _, mask := range masks {
		var p Parts
		for f := field(0); f < nFields; f++ {
			if mask&(1<<f) != 0 {
				*f.get(&p) = sentinel(f)
			}
		}
		text, err := domain.RenderWorldTemplate(t, p)
		if err != nil || seen[text] {
			continue
		}
		seen[text] = true
		sk, written := compileSkeleton(text)
		if written != mask {
			continue
		}
		out = append(out, sk)
	}
	return out
}

// compileSkeleton turns rendered skeleton text into its expression and
// reports the set of components written in it.
func compileSkeleton(text string) (*skeleton, int) {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	sk := &skeleton{}
	written, last := 0, 0
	for _, m := range sentinelRE.FindAllStringSubmatchIndex(text, -1) {
		sk.lits = append(sk.lits, text[last:m[0]])
		b.WriteString(regexp.QuoteMeta(text[last:m[0]]))
		b.WriteString(`(.+?)`)
		f := field(text[m[2]] - '0')
		sk.groups = append(sk.groups, f)
		written |= 1 << f
		last = m[1]
	}
	sk.lits = append(sk.lits, text[last:])
	b.WriteString(regexp.QuoteMeta(text[last:]))
	b.WriteString(`\z`)
	sk.re = regexp.MustCompile(b.String())
	return sk, written
}

// match recovers the components of system from sk, or reports false. A
// component written twice must have been the same text both times.
func (sk *skeleton) match(system string) (Parts, bool) {
	var p Parts
	if !sk.plausible(system) {
		return p, false
	}
	m := sk.re.FindStringSubmatch(system)
	if m == nil {
		return p, false
	}
	set := [nFields]bool{}
	for i, f := range sk.groups {
		dst := f.get(&p)
		if set[f] && *dst != m[i+1] {
			return p, false
		}
		*dst, set[f] = m[i+1], true
	}
	return p, true
}

// decomposer recovers components and keeps the skeletons it compiled, so
// that many prompts cost one compilation per version and domain.
type decomposer struct {
	versions []*Version
	mu       sync.Mutex
	skel     map[skelKey][]*skeleton
}

type skelKey struct {
	id string
	d  domain.Domain
}

func (dc *decomposer) skeletons(v *Version, d domain.Domain) []*skeleton {
	dc.mu.Lock()
	defer dc.mu.Unlock()
	k := skelKey{v.ID, d}
	if s, ok := dc.skel[k]; ok {
		return s
	}
	if dc.skel == nil {
		dc.skel = map[skelKey][]*skeleton{}
	}
	s := skeletons(v, d)
	dc.skel[k] = s
	return s
}

// decompose implements [Library.Decompose].
func (dc *decomposer) decompose(d domain.Domain, system string) (Parts, string, error) {
	if strings.TrimSpace(system) == "" {
		return Parts{}, "", fmt.Errorf("%w: it is empty", ErrNotDecomposable)
	}
	var tried []string
	for _, v := range dc.versions {
		t, ok := v.parsed[d]
		if !ok {
			continue
		}
		tried = append(tried, v.Name)
		for _, sk := range dc.skeletons(v, d) {
			p, ok := sk.match(system)
			if !ok {
				continue
			}
			// The expression may split ambiguously (a component holding a
			// heading of the template); only a split that renders back to
			// the same bytes is the one the prompt was made from.
			if again, err := domain.RenderWorldTemplate(t, p); err != nil || again != system {
				continue
			}
			if p.SimulationInstruction == domain.TemplateRules(t) {
				p.SimulationInstruction = "" // the default: the target version's own rules apply
			}
			return p, v.Name, nil
		}
	}
	p, err := parseSections(system)
	if err != nil {
		return Parts{}, "", fmt.Errorf("%w: no version of the library renders it for domain %s (tried %s), and %v", ErrNotDecomposable, d, strings.Join(tried, ", "), err)
	}
	return p, SectionsLayout, nil
}

// SectionsLayout is what [Library.Decompose] reports for a prompt laid out
// as "## " sections rather than rendered by a version.
const SectionsLayout = "sections"

// sectionTitles maps the headings of a sectioned prompt (lower case) to
// the component they hold: the published rows' headings, the ones
// expand.AssembleSystemPrompt writes, and a few common variants.
var sectionTitles = map[string]field{
	"task":                    fTask,
	"task description":        fTask,
	"action space":            fAction,
	"actions":                 fAction,
	"tools":                   fAction,
	"available tools":         fAction,
	"available actions":       fAction,
	"initial state":           fInitial,
	"demonstrations":          fDemos,
	"examples":                fDemos,
	"example transitions":     fDemos,
	"how to simulate":         fSim,
	"simulation instructions": fSim,
	"simulation instruction":  fSim,
}

// SectionsShape describes the sectioned layout [Library.Decompose] reads,
// for error messages and documentation.
const SectionsShape = `an optional preamble, then "## " sections: "## Task", "## Action space" (or "## Tools"), "## Initial state", "## Demonstrations" (whose "## Example N" headings belong to it) and "## How to simulate" (or "## Simulation instructions")`

// parseSections reads a prompt laid out as SectionsShape: the preamble
// (the environment's description) opens the task description, each
// section is its component. The action space is required: a world prompt
// without one cannot be re-rendered meaningfully.
func parseSections(system string) (Parts, error) {
	var p Parts
	var preamble strings.Builder
	cur := field(-1)
	var body [nFields]*strings.Builder
	for _, line := range strings.Split(system, "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			key := strings.ToLower(strings.TrimSpace(strings.TrimRight(strings.TrimSpace(title), ":")))
			if f, known := sectionTitles[key]; known {
				if body[f] != nil {
					return p, fmt.Errorf("its section %q appears twice (want %s)", line, SectionsShape)
				}
				body[f] = &strings.Builder{}
				cur = f
				continue
			}
			if !(cur == fDemos && strings.HasPrefix(key, "example")) {
				return p, fmt.Errorf("its section %q is not a component (want %s)", line, SectionsShape)
			}
		}
		w := &preamble
		if cur >= 0 {
			w = body[cur]
		}
		w.WriteString(line)
		w.WriteByte('\n')
	}
	if body[fAction] == nil {
		return p, fmt.Errorf("it has no action space section (want %s)", SectionsShape)
	}
	for f := field(0); f < nFields; f++ {
		if body[f] != nil {
			*f.get(&p) = strings.TrimSpace(body[f].String())
		}
	}
	if pre := strings.TrimSpace(preamble.String()); pre != "" {
		p.TaskDescription = strings.TrimSpace(pre + "\n\n" + p.TaskDescription)
	}
	return p, nil
}

// Decompose recovers the components of a system prompt of domain d: as
// rendered by one of the library's versions (the split is checked by
// rendering it back to the same bytes; an instruction equal to that
// version's default rules comes back empty, so another version's rules
// apply), else as the sectioned layout of the published benchmark rows
// ([SectionsShape]). It also says where the parts came from: the name of
// the version, or [SectionsLayout]. An error wraps [ErrNotDecomposable].
func (l *Library) Decompose(d domain.Domain, system string) (Parts, string, error) {
	dc := decomposer{versions: l.versions}
	return dc.decompose(d, system)
}

// Rerenderer renders system prompts again under one version: each prompt
// is split into its components ([Library.Decompose]) and rendered with the
// version, so a benchmark row that carries only its rendered prompt can be
// evaluated under any version. Safe for concurrent use.
type Rerenderer struct {
	v  *Version
	dc decomposer

	mu   sync.Mutex
	memo map[memoKey]memoVal
}

type memoKey struct {
	d      domain.Domain
	system string
}

type memoVal struct {
	out string
	err error
}

// memoLimit bounds the remembered prompts; rows of one trajectory share a
// prompt and arrive together, so a small memory catches the repeats.
const memoLimit = 256

// NewRerenderer renders under v, recognising prompts rendered by any
// version of l.
func NewRerenderer(l *Library, v *Version) *Rerenderer {
	return &Rerenderer{v: v, dc: decomposer{versions: l.versions}, memo: map[memoKey]memoVal{}}
}

// Version is the version prompts are rendered under.
func (r *Rerenderer) Version() *Version { return r.v }

// Rerender is system, a prompt of domain d, rendered under the version.
func (r *Rerenderer) Rerender(d domain.Domain, system string) (string, error) {
	k := memoKey{d, system}
	r.mu.Lock()
	m, ok := r.memo[k]
	r.mu.Unlock()
	if ok {
		return m.out, m.err
	}
	p, _, err := r.dc.decompose(d, system)
	if err == nil {
		m.out, err = r.v.RenderParts(d, p)
	}
	m.err = err
	r.mu.Lock()
	if len(r.memo) >= memoLimit {
		clear(r.memo)
	}
	r.memo[k] = m
	r.mu.Unlock()
	return m.out, m.err
}
