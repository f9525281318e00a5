package reward

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSameFamily refuses a judge of the same model family as the policy
// under training: a policy learns to please a judge that shares its
// tastes, and the reward stops measuring the environment.
var ErrSameFamily = errors.New("judge model is of the same family as the policy")

// familyAliases maps a model name's leading word to its family where one
// maker uses several names.
var familyAliases = map[string]string{
	"gpt": "openai", "chatgpt": "openai", "o": "openai", "davinci": "openai",
	"claude": "anthropic",
	"gemini": "google", "gemma": "google", "palm": "google",
	"qwen": "qwen", "qwq": "qwen",
	"llama": "llama", "codellama": "llama",
	"mistral": "mistral", "mixtral": "mistral", "codestral": "mistral", "ministral": "mistral",
	"glm": "glm", "chatglm": "glm",
	"kimi": "moonshot", "moonshot": "moonshot",
}

// Family is a model's family as far as its name tells: the part after the
// last '/', lower-cased, its leading letters, with the makers' aliases
// joined ("Qwen/Qwen3.5-35B-A3B" and "qwq-32b" → "qwen", "gpt-5.4" and
// "o3-mini" → "openai"). "" for a name without letters.
func Family(model string) string {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	model = strings.ToLower(strings.TrimSpace(model))
	end := 0
	for end < len(model) && model[end] >= 'a' && model[end] <= 'z' {
		end++
	}
	word := model[:end]
	if f, ok := familyAliases[word]; ok {
		return f
	}
	return word
}

// checkFamilies refuses a judge of the policy's family unless allowed.
func checkFamilies(judgeModel, policyModel string, allow bool) error {
	if allow || judgeModel == "" || policyModel == "" {
		return nil
	}
	if f := Family(judgeModel); f != "" && f == Family(policyModel) {
		return fmt.Errorf("%w: judge %q and policy %q are both %s (allow it explicitly to go on)", ErrSameFamily, judgeModel, policyModel, f)
	}
	return nil
}
