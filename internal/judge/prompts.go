package judge

import (
	"embed"
	"strings"

	"github.com/agentworld/agentworld/internal/domain"
)

// The judge prompts are text files so they can be read and reviewed as
// prose: one per domain describing what matters in that environment, a
// generic one for unknown domains, the rubric shared by all (common.md),
// what the pairwise modes add to a domain's prompt (pairwise.md), and the
// three user templates (pointwise.txt, turing.txt, reference.txt) in
// str.format syntax, with the placeholders of the official templates.
//
//go:embed prompts/*.md prompts/*.txt
var promptFS embed.FS

func mustPrompt(name string) string {
	b, err := promptFS.ReadFile("prompts/" + name)
	if err != nil {
		panic("judge: missing embedded prompt " + name + ": " + err.Error())
	}
	return strings.TrimRight(string(b), "\n")
}

func mustTemplate(mode Mode) *Template {
	spec := templateSpecs[mode]
	t, err := parseTemplate("agentworld", spec.name, mustPrompt(string(mode)+".txt"), nil, spec.fields, spec.fields)
	if err != nil {
		panic("judge: embedded template: " + err.Error())
	}
	return t
}

// own is agentworld's own judge text: our words, the official structure.
var own = func() *Prompts {
	common, pairwise := mustPrompt("common.md"), mustPrompt("pairwise.md")
	p := &Prompts{
		system:   map[string]string{},
		pairwise: map[string]string{},
		tmpl:     map[Mode]*Template{},
	}
	for _, d := range append(append([]domain.Domain(nil), domain.All...), "generic") {
		base := mustPrompt(string(d) + ".md")
		p.system[string(d)] = base + "\n\n" + common
		p.pairwise[string(d)] = base + "\n\n" + pairwise
	}
	for _, m := range Modes {
		p.tmpl[m] = mustTemplate(m)
	}
	return p
}()

// Own returns agentworld's own judge text (what a nil *Prompts means).
func Own() *Prompts { return own }

// SystemPrompt returns agentworld's own pointwise judge system prompt for
// domain d (a name such as "terminal"; case and surrounding space are
// ignored). For a domain that is not one of the seven it returns the
// generic prompt and generic=true, so the caller can record that the sample
// was judged without a domain rubric. [Prompts.System] is the same for
// either text and any mode.
func SystemPrompt(d string) (prompt string, generic bool) {
	return own.System(Pointwise, d)
}

// System returns the judge system prompt of mode for domain d (a task
// name's last part). With the official text it is the domain's
// judge_system_prompt.txt whatever the mode, and for an unknown domain the
// empty string, as the official script sends; with agentworld's text an
// unknown domain gets the generic prompt. generic reports an unknown domain.
func (p *Prompts) System(mode Mode, d string) (prompt string, generic bool) {
	if p == nil {
		p = own
	}
	if p.official {
		s, ok := p.system[officialSubtask(d)]
		return s, !ok
	}
	m := p.system
	if mode != Pointwise {
		m = p.pairwise
	}
	dom := domain.FromTask(d)
	if s, ok := m[string(dom)]; ok && dom.Known() {
		return s, false
	}
	return m["generic"], true
}
