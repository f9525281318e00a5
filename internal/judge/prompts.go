package judge

import (
	"embed"
	"strings"

	"github.com/agentworld/agentworld/internal/domain"
)

// The judge prompts are markdown files so they can be read and reviewed as
// prose: one per domain describing what matters in that environment, a
// generic one for unknown domains, the rubric shared by all (common.md) and
// the instructions closing every judge user message.
//
//go:embed prompts/*.md
var promptFS embed.FS

func mustPrompt(name string) string {
	b, err := promptFS.ReadFile("prompts/" + name + ".md")
	if err != nil {
		panic("judge: missing embedded prompt " + name + ": " + err.Error())
	}
	return strings.TrimRight(string(b), "\n")
}

var (
	commonPrompt = mustPrompt("common")
	instructions = mustPrompt("instructions")
	systemByName = func() map[string]string {
		m := make(map[string]string, len(domain.All)+1)
		for _, d := range domain.All {
			m[string(d)] = mustPrompt(string(d)) + "\n\n" + commonPrompt
		}
		m["generic"] = mustPrompt("generic") + "\n\n" + commonPrompt
		return m
	}()
)

// SystemPrompt returns the judge system prompt for domain d (a name such as
// "terminal"; case and surrounding space are ignored). For a domain that is
// not one of the seven it returns the generic prompt and generic=true, so the
// caller can record that the sample was judged without a domain rubric.
func SystemPrompt(d string) (prompt string, generic bool) {
	if p, ok := systemByName[string(domain.FromTask(d))]; ok && domain.FromTask(d).Known() {
		return p, false
	}
	return systemByName["generic"], true
}
