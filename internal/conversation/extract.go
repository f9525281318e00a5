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
	if strings.ContainsRune(s, '\u212a') || strings.ContainsRune(s, '\u017f') {
		return splitThinkingRegexp(s, keep)
	}
	return splitThinkingScan(s, keep)
}

// splitThinkingScan is splitThinking for a string without K or ſ, which
// (?i) folds to k and s: the tags can then only be spelled in ASCII
// letters of either case, and are found by scanning rather than by the
// regexps, with the same leftmost, non-overlapping matches.
func splitThinkingScan(s string, keep bool) (answer, thinking string) {
	const open, closing, answerTag = "<think>", "</think>", "<predicted_observation>"
	var parts []string
	add := func(p string) {
		if p = strings.TrimSpace(p); keep && p != "" {
			parts = append(parts, p)
		}
	}
	// Every <think>…</think> pair, the shortest from each leftmost <think>.
	if i := indexFold(s, open); i >= 0 {
		var b strings.Builder
		from := 0 // s[from:] is not yet copied to b
		for i >= 0 {
			j := indexFold(s[i+len(open):], closing)
			if j < 0 {
				break
			}
			end := i + len(open) + j + len(closing)
			if keep {
				add(s[i+len(open) : end-len(closing)])
			}
			b.WriteString(s[from:i])
			from = end
			if i = indexFold(s[end:], open); i >= 0 {
				i += end
			}
		}
		switch {
		case from > 0 && b.Len() == 0:
			// Only leading pairs went (the usual "<think>…</think>answer"):
			// what is left is the rest of s, which need not be copied.
			s = s[from:]
		case from > 0:
			b.WriteString(s[from:])
			s = b.String()
		}
	}
	// An unmatched </think>: everything before the last one goes.
	if last := lastIndexFold(s, closing); last >= 0 {
		if keep {
			add(removeFold(s[:last], closing))
		}
		s = s[last+len(closing):]
	}
	// An unmatched <think>: to the next answer tag, or to the end.
	for {
		at := indexFold(s, open)
		if at < 0 {
			return s, strings.Join(parts, "\n\n")
		}
		rest := s[at+len(open):]
		if a := indexFold(rest, answerTag); a >= 0 {
			add(rest[:a])
			s = s[:at] + rest[a:]
		} else {
			add(rest)
			s = s[:at]
		}
	}
}

// removeFold returns s without its occurrences of tag (indexFold's
// matches, left to right).
func removeFold(s, tag string) string {
	var b strings.Builder
	for {
		i := indexFold(s, tag)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i+len(tag):]
	}
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
	return predictionOf(StripThinking(gen))
}

// SplitAnswer is ExtractPrediction(gen) and Reasoning(gen) from one pass
// over the thinking, for a generation whose reasoning the server did not
// return apart.
func SplitAnswer(gen string) (prediction, reasoning string) {
	answer, reasoning := splitThinking(gen, true)
	return predictionOf(answer), reasoning
}

// predictionOf is ExtractPrediction of a generation whose thinking is gone.
func predictionOf(s string) string {
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
