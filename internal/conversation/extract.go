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
	if !mayHaveThinkTag(s) {
		return s, "" // the usual answer: no regexp run over it
	}
	return splitThinkingRegexp(s, keep)
}

// splitThinkingRegexp is splitThinking by the regexps alone.
func splitThinkingRegexp(s string, keep bool) (answer, thinking string) {
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
	if !strings.ContainsRune(s, '\u017f') {
		// Without ſ, which (?i) folds to s, the tags can only be spelled in
		// ASCII letters of either case: find them without the regexps. The
		// last match is the last occurrence (a tag cannot overlap itself:
		// it starts with its only '<').
		at := lastIndexFold(s, "<predicted_observation>")
		if at < 0 {
			return "", false
		}
		body := s[at+len("<predicted_observation>"):]
		if c := indexFold(body, "</predicted_observation>"); c >= 0 {
			body = body[:c]
		}
		return pytext.Strip(body), true
	}
	return lastTagContentRegexp(s)
}

// lastTagContentRegexp is LastTagContent by the regexps alone.
func lastTagContentRegexp(s string) (string, bool) {
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

// mayHaveThinkTag reports whether s might hold a <think> or </think> tag
// as the (?i) regexps match them: false only when it surely holds neither.
// Besides ASCII case, (?i) folds the Kelvin sign K to k; a string with one
// goes to the regexps.
func mayHaveThinkTag(s string) bool {
	if strings.ContainsRune(s, '\u212a') {
		return true
	}
	return indexFold(s, "<think>") >= 0 || indexFold(s, "</think>") >= 0
}

// indexFold is the index of the first occurrence of tag in s under ASCII
// case folding, or -1. tag is lower case ASCII starting with '<'.
func indexFold(s, tag string) int {
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			return -1
		}
		i += j
		if len(s)-i < len(tag) {
			return -1
		}
		if equalFoldASCII(s[i:i+len(tag)], tag) {
			return i
		}
		i++
	}
}

// lastIndexFold is indexFold's last occurrence.
func lastIndexFold(s, tag string) int {
	for end := len(s); ; {
		i := strings.LastIndexByte(s[:end], '<')
		if i < 0 {
			return -1
		}
		if len(s)-i >= len(tag) && equalFoldASCII(s[i:i+len(tag)], tag) {
			return i
		}
		end = i
	}
}

// equalFoldASCII reports whether a equals lower, a lower case ASCII
// string of the same length, ignoring the case of ASCII letters only.
func equalFoldASCII(a, lower string) bool {
	for i := 0; i < len(lower); i++ {
		c := a[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
