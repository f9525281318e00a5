package domain

import (
	"embed"
	"fmt"
	"strings"
	"text/template"
)

//go:embed templates/world_*.md
var worldTemplateFS embed.FS

// worldTemplates holds one parsed template per domain; each defines
// "prompt" (the whole system prompt) and "rules" (the default simulation
// instruction), sharing "body" from world_common.md.
var worldTemplates = func() map[Domain]*template.Template {
	common, err := worldTemplateFS.ReadFile("templates/world_common.md")
	if err != nil {
		panic(err)
	}
	out := map[Domain]*template.Template{}
	for _, d := range All {
		src, err := worldTemplateFS.ReadFile("templates/world_" + string(d) + ".md")
		if err != nil {
			panic(err)
		}
		t := template.Must(template.New(string(d)).Parse(string(common)))
		out[d] = template.Must(t.Parse(string(src)))
	}
	return out
}()

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
	if strings.TrimSpace(p.SimulationInstruction) == "" {
		p.SimulationInstruction = DefaultSimulationInstruction(d)
	}
	p.TaskDescription = strings.TrimSpace(p.TaskDescription)
	p.ActionSpace = strings.TrimSpace(p.ActionSpace)
	p.InitialState = strings.TrimSpace(p.InitialState)
	p.Demonstrations = strings.TrimSpace(p.Demonstrations)
	p.SimulationInstruction = strings.TrimSpace(p.SimulationInstruction)
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "prompt", p); err != nil {
		return "", fmt.Errorf("render %s world prompt: %w", d, err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}
