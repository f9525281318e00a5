package conversation

import (
	"regexp"
	"strings"

	"github.com/agentworld/agentworld/internal/pytext"
)

// NoOutput is the prediction used when a generation holds nothing once
// thinking is removed, as the published evaluation does.
const NoOutput = "No output"

var (
	thinkPair   = regexp.MustCompile(`(?is)<think>(.*?)</think>`)
	thinkClose  = regexp.MustCompile(`(?i)</think>`)
	thinkOpen   = regexp.MustCompile(`(?i)<think>`)
	answerOpen  = regexp.MustCompile(`(?i)<predicted_observation>`)
	answerClose = regexp.MustCompile(`(?i)</predicted_observation>`)
)

// StripThinking removes reasoning from a generation: every matched
// <think>…</think> pair; then, for an unmatched </think>, everything before
// it; then, for an unmatched <think>, the text from it up to the first
// <predicted_observation> after it, or to the end. Tags are case-insensitive.
func StripThinking(s string) string {
	answer, _ := splitThinking(s, false)
	return answer
}

// Reasoning returns the thinking StripThinking removes, by the same rules:
// the inside of every matched <think>…</think> pair, then everything before
// an unmatched </think> (the usual shape when the chat template opens the
// <think> block in the prompt and the generation starts inside it), then an
// unmatched <think>'s text up to the first <predicted_observation> or the
// end. Pieces are trimmed and joined with a blank line; "" when there is no
// thinking. Servers with a reasoning parser return the thinking separately
// (Response.Reasoning); this is for those without one.
func Reasoning(s string) string {
	_, thinking := splitThinking(s, true)
	return thinking
}

// splitThinking applies StripThinking's rules once and returns what is left
// and, when keep is set, what was removed.
func splitThinking(s string, keep bool) (answer, thinking string) {
	var parts []string
	add := func(p string) {
		if p = strings.TrimSpace(p); keep && p != "" {
			parts = append(parts, p)
		}
	}
	if keep {
		for _, m := range thinkPair.FindAllStringSubmatch(s, -1) {
			add(m[1])
		}
	}
	s = thinkPair.ReplaceAllString(s, "")
	if locs := thinkClose.FindAllStringIndex(s, -1); len(locs) > 0 {
		last := locs[len(locs)-1]
		if keep {
			add(thinkClose.ReplaceAllString(s[:last[0]], ""))
		}
		s = s[last[1]:]
	}
	for {
		loc := thinkOpen.FindStringIndex(s)
		if loc == nil {
			return s, strings.Join(parts, "\n\n")
		}
		rest := s[loc[1]:]
		if a := answerOpen.FindStringIndex(rest); a != nil {
			add(rest[:a[0]])
			s = s[:loc[0]] + rest[a[0]:]
		} else {
			add(rest)
			s = s[:loc[0]]
		}
	}
}

// ExtractPrediction returns the predicted observation of a generation as the
// published evaluation reads it: thinking removed, then the content of the
// last <predicted_observation> block (to its closing tag, or to the end when
// unclosed), stripped; without a tag the cleaned text stripped; NoOutput when
// nothing is left.
func ExtractPrediction(gen string) string {
	s := StripThinking(gen)
	if p, ok := LastTagContent(s); ok {
		return p
	}
	s = pytext.Strip(s)
	if s == "" {
		return NoOutput
	}
	return s
}

// LastTagContent returns the stripped content of the last
// <predicted_observation> block of s and whether there was one.
func LastTagContent(s string) (string, bool) {
	locs := answerOpen.FindAllStringIndex(s, -1)
	if len(locs) == 0 {
		return "", false
	}
	body := s[locs[len(locs)-1][1]:]
	if c := answerClose.FindStringIndex(body); c != nil {
		body = body[:c[0]]
	}
	return pytext.Strip(body), true
}

// Answer wraps an observation in the answer tag the world-model prompts ask
// for, one newline inside each side. It is the generation a model should
// produce for that observation (the target of a training sample), and
// [ExtractPrediction] reads it back as the observation stripped.
func Answer(obs string) string {
	return "<predicted_observation>\n" + obs + "\n</predicted_observation>"
}
