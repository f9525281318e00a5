// Package itemf1 scores multi-item answers the way WideSearch-style
// benchmarks do: the agent's answer and the expected answer are sets of
// items, each normalized (case, punctuation, articles, spacing), matched
// one to one, and scored by precision, recall and their harmonic mean, the
// item F1.
package itemf1

import (
	"encoding/json"
	"strings"
	"unicode"
)

// Score is the comparison of a predicted item set with an expected one.
type Score struct {
	// Precision is Matched / Predicted (1 when both sets are empty, 0 when
	// only Predicted is).
	Precision float64 `json:"precision"`
	// Recall is Matched / Expected (1 when both sets are empty).
	Recall float64 `json:"recall"`
	// F1 is the harmonic mean of Precision and Recall; 0 when both are 0.
	F1 float64 `json:"f1"`
	// Matched counts the distinct normalized items in both sets.
	Matched int `json:"matched"`
	// Predicted and Expected count the distinct normalized non-empty items
	// of each set.
	Predicted int `json:"predicted"`
	Expected  int `json:"expected"`
}

// Compute scores predicted items against expected ones. Items are compared
// after [Normalize]; an item repeated (after normalizing) counts once, and
// empty items are dropped, so padding an answer with repeats or blanks
// never raises its score.
func Compute(predicted, expected []string) Score {
	p, e := set(predicted), set(expected)
	s := Score{Predicted: len(p), Expected: len(e)}
	for k := range p {
		if e[k] {
			s.Matched++
		}
	}
	switch {
	case s.Predicted == 0 && s.Expected == 0:
		s.Precision, s.Recall, s.F1 = 1, 1, 1
		return s
	case s.Predicted == 0 || s.Expected == 0:
		return s
	}
	s.Precision = float64(s.Matched) / float64(s.Predicted)
	s.Recall = float64(s.Matched) / float64(s.Expected)
	if s.Precision+s.Recall > 0 {
		s.F1 = 2 * s.Precision * s.Recall / (s.Precision + s.Recall)
	}
	return s
}

// ScoreAnswer splits an answer text into items ([Items]) and scores them.
func ScoreAnswer(answer string, expected []string) Score {
	return Compute(Items(answer), expected)
}

func set(items []string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, it := range items {
		if n := Normalize(it); n != "" {
			m[n] = true
		}
	}
	return m
}

// articles are dropped as whole words: "The Lumen 3" and "Lumen 3" are the
// same item.
var articles = map[string]bool{"a": true, "an": true, "the": true}

// Normalize lowercases s, turns punctuation into spaces (a comma or point
// between two digits is dropped instead, so "18,400" reads 18400 and
// "2.1" reads 21 either way it was written), drops the articles a, an
// and the, and joins the words with single spaces.
func Normalize(s string) string {
	rs := []rune(strings.ToLower(s))
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		case (r == ',' || r == '.') && i > 0 && i+1 < len(rs) && unicode.IsDigit(rs[i-1]) && unicode.IsDigit(rs[i+1]):
			// a thousands separator or decimal point: keep the number whole
		default:
			b.WriteByte(' ')
		}
	}
	words := strings.Fields(b.String())
	out := words[:0]
	for _, w := range words {
		if !articles[w] {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

// Items splits an answer text into its items: a JSON array of strings
// gives its elements; otherwise each non-empty line is an item (list
// markers such as "- ", "* " and "3. " removed), and a one-line answer is
// split at semicolons, or failing those at commas, with a leading "and "
// dropped from each part and the last part split at " and " ("A, B and C"
// gives A, B, C; "A and B" alone stays one item, a name such as "Marks and
// Spencer" may be one).
func Items(answer string) []string {
	answer = strings.TrimSpace(answer)
	if strings.HasPrefix(answer, "[") {
		var arr []string
		if json.Unmarshal([]byte(answer), &arr) == nil {
			return arr
		}
	}
	var lines []string
	for ln := range strings.SplitSeq(answer, "\n") {
		if ln = stripMarker(strings.TrimSpace(ln)); ln != "" {
			lines = append(lines, ln)
		}
	}
	if len(lines) != 1 {
		return lines
	}
	one := lines[0]
	sep := ","
	if strings.Contains(one, ";") {
		sep = ";"
	}
	parts := strings.Split(one, sep)
	if last := parts[len(parts)-1]; sep == "," && len(parts) > 1 {
		// "A, B and C": the last comma-separated part holds two items
		if i := strings.LastIndex(last, " and "); i >= 0 {
			parts = append(parts[:len(parts)-1], last[:i], last[i+len(" and "):])
		}
	}
	var out []string
	for _, part := range parts {
		part = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(part), "and "))
		if part != "" {
			out = append(out, part)
		}
	}
	return out
}

// stripMarker removes a list marker ("- ", "* ", "• ", "12. ", "3) ").
func stripMarker(ln string) string {
	for _, m := range []string{"- ", "* ", "• "} {
		if strings.HasPrefix(ln, m) {
			return strings.TrimSpace(ln[len(m):])
		}
	}
	i := 0
	for i < len(ln) && ln[i] >= '0' && ln[i] <= '9' {
		i++
	}
	if i > 0 && i+1 < len(ln) && (ln[i] == '.' || ln[i] == ')') && ln[i+1] == ' ' {
		return strings.TrimSpace(ln[i+2:])
	}
	return ln
}
