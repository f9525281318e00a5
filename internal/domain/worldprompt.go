package domain

import (
	"embed"
	"fmt"
	"strings"

	template "github.com/DataDog/datadog-agent/pkg/template/text"
)

//go:embed templates/world_*.md
var worldTemplateFS embed.FS

// The templates are Go text/template syntax, run by DataDog's copy of
// text/template that cannot call methods: the data is WorldPromptParts'
// string fields, so none is lost, and the standard package's run-time
// method lookup would make the linker keep every exported method in the
// binary (4.7 MB of it).

// worldTemplates holds one parsed template per domain; each defines
// "prompt" (the whole system prompt) and "rules" (the default simulation
// instruction), sharing "body" from world_common.md.
var worldTemplates = func() map[Domain]*template.Template {
	out := map[Domain]*template.Template{}
	for _, d := range All {
		src, err := WorldTemplateSource(d)
		if err != nil {
			panic(err)
		}
		t, err := ParseWorldTemplate(string(d), src)
		if err != nil {
			panic(err)
		}
		out[d] = t
	}
	return out
}()

// WorldTemplateSource is the template text the built-in system prompt of d
// is rendered from: world_common.md followed by the domain's own file. A
// prompt version (see package promptlib) starts from it and edits it.
func WorldTemplateSource(d Domain) (string, error) {
	common, err := worldTemplateFS.ReadFile("templates/world_common.md")
	if err != nil {
		return "", err
	}
	src, err := worldTemplateFS.ReadFile("templates/world_" + string(d) + ".md")
	if err != nil {
		return "", fmt.Errorf("unknown domain %q (want one of %s)", d, names())
	}
	return string(common) + string(src), nil
}

// ParseWorldTemplate compiles world-prompt template text of the shape
// [WorldTemplateSource] returns. It must define "prompt" (the whole system
// prompt over [WorldPromptParts]); "rules", when defined, is the default
// simulation instruction.
func ParseWorldTemplate(name, src string) (*template.Template, error) {
	t, err := template.New(name).Parse(src)
	if err != nil {
		return nil, err
	}
	if t.Lookup("prompt") == nil {
		return nil, fmt.Errorf("template %s defines no \"prompt\" block ({{define \"prompt\"}}…{{end}})", name)
	}
	return t, nil
}

// WorldPromptParts are the five components of a world-model system prompt,
// each already rendered as text. An empty SimulationInstruction selects the
// domain's default rules.
type WorldPromptParts struct {
	TaskDescription       string
	ActionSpace           string
	InitialState          string
	Demonstrations        string
	SimulationInstruction string
}

// DefaultSimulationInstruction is the domain's own fidelity rules, used when
// a world spec gives none.
func DefaultSimulationInstruction(d Domain) string {
	t, ok := worldTemplates[d]
	if !ok {
		return ""
	}
	return rules(t)
}

// TemplateRules is the default simulation instruction of a template from
// [ParseWorldTemplate]: its "rules" block, trimmed; "" when it has none.
// A prompt rendered with an empty SimulationInstruction carries this text.
func TemplateRules(t *template.Template) string { return rules(t) }

// rules executes t's "rules" block; "" when it has none or it fails.
func rules(t *template.Template) string {
	if t.Lookup("rules") == nil {
		return ""
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "rules", nil); err != nil {
		return ""
	}
	return strings.TrimSpace(b.String())
}

// RenderWorldPrompt assembles the world-model system prompt of domain d from
// its components. The output depends only on its inputs, so a session's
// system prompt is byte-stable for its whole life.
func RenderWorldPrompt(d Domain, p WorldPromptParts) (string, error) {
	t, ok := worldTemplates[d]
	if !ok {
		return "", fmt.Errorf("unknown domain %q (want one of %s)", d, names())
	}
	return RenderWorldTemplate(t, p)
}

// RenderWorldTemplate assembles a system prompt from its components with t
// (from [ParseWorldTemplate]); an empty SimulationInstruction takes t's
// "rules". The built-in prompts are this over the built-in templates.
func RenderWorldTemplate(t *template.Template, p WorldPromptParts) (string, error) {
	if strings.TrimSpace(p.SimulationInstruction) == "" {
		p.SimulationInstruction = rules(t)
	}
	p.TaskDescription = strings.TrimSpace(p.TaskDescription)
	p.ActionSpace = strings.TrimSpace(p.ActionSpace)
	p.InitialState = strings.TrimSpace(p.InitialState)
	p.Demonstrations = strings.TrimSpace(p.Demonstrations)
	p.SimulationInstruction = strings.TrimSpace(p.SimulationInstruction)
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "prompt", p); err != nil {
		return "", fmt.Errorf("render %s world prompt: %w", t.Name(), err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}
