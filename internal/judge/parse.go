package judge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/pytext"
	"github.com/agentworld/agentworld/internal/score"
)

// ErrUnparseable means a judge answer held no JSON object with a "scores"
// object, even after the repairs and the salvage step. The pipeline retries
// such an attempt at once; three failures make the sample failed.
var ErrUnparseable = errors.New("judge output unparseable")

// Verdict is the judge's prose beside the scores.
type Verdict struct {
	Strengths  []string `json:"strengths,omitempty"`
	Weaknesses []string `json:"weaknesses,omitempty"`
}

var (
	finalOpen    = regexp.MustCompile(`(?i)<final_evaluation>`)
	finalClose   = regexp.MustCompile(`(?i)</final_evaluation>`)
	fencedBlock  = regexp.MustCompile("(?s)```(?:[A-Za-z0-9_+-]*)[ \t]*\r?\n?(.*?)```")
	trailingComa = regexp.MustCompile(`,(\s*[}\]])`)
	unquotedKey  = regexp.MustCompile(`([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*):`)
	singleKey    = regexp.MustCompile(`([{,]\s*)'([^'"\\]*)'(\s*):`)
	scoresObject = regexp.MustCompile(`["']scores["']\s*:\s*(\{[^{}]*\})`)
)

// Parse reads a judge answer as the published evaluation does:
//
//  1. thinking is removed (conversation.StripThinking);
//  2. if there is a <final_evaluation> tag, only the last such block is kept
//     (to its closing tag, or to the end when unclosed);
//  3. a JSON candidate is chosen, first match wins: the last fenced block
//     that is an object mentioning "scores", else the last fenced block that
//     is an object; the last balanced top-level {...} mentioning "scores",
//     else the last balanced object; the span from the last '}' back to the
//     '{' that balances it;
//  4. the candidate is decoded; if that fails it is decoded again after the
//     repairs (trailing commas removed, bare and single-quoted keys quoted);
//     if that fails too, just the `"scores": {...}` object is salvaged from
//     the candidate, or else from the text of step 2;
//  5. the decoded object must hold a "scores" object, otherwise the answer is
//     ErrUnparseable.
//
// Each dimension then becomes an int (see dimensionValue), and values above 0
// are clamped into 1..5; negative values are kept, as the published script
// keeps them. A missing dimension is 0.
func Parse(output string) (score.Scores, Verdict, error) {
	text := verdictText(output)
	obj, salvaged, err := decodeCandidate(text)
	if err != nil {
		return score.Scores{}, Verdict{}, err
	}
	dims, err := scoresOf(obj)
	if err != nil {
		return score.Scores{}, Verdict{}, err
	}
	s := score.Scores{
		Format:      dimensionValue(dims["format"]),
		Factuality:  dimensionValue(dims["factuality"]),
		Consistency: dimensionValue(dims["consistency"]),
		Realism:     dimensionValue(dims["realism"]),
		Quality:     dimensionValue(dims["quality"]),
	}
	var v Verdict
	if !salvaged {
		v.Strengths = stringList(obj["strengths"])
		v.Weaknesses = stringList(obj["weaknesses"])
	}
	return s, v, nil
}

// verdictText is steps 1 and 2 of Parse: thinking removed, then the last
// <final_evaluation> block when there is one.
func verdictText(output string) string {
	text := conversation.StripThinking(output)
	if locs := finalOpen.FindAllStringIndex(text, -1); len(locs) > 0 {
		text = text[locs[len(locs)-1][1]:]
		if c := finalClose.FindStringIndex(text); c != nil {
			text = text[:c[0]]
		}
	}
	return text
}

// scoresOf is step 5 of Parse: the decoded object's "scores" object.
func scoresOf(obj map[string]any) (map[string]any, error) {
	rawScores, ok := obj["scores"]
	if !ok {
		return nil, fmt.Errorf("%w: JSON object has no \"scores\"", ErrUnparseable)
	}
	dims, ok := rawScores.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: \"scores\" is not an object", ErrUnparseable)
	}
	return dims, nil
}

// decodeCandidate finds and decodes the JSON object of a judge answer;
// salvaged reports that only the scores object could be recovered.
func decodeCandidate(text string) (obj map[string]any, salvaged bool, err error) {
	cand, ok := findCandidate(text)
	if !ok {
		return nil, false, fmt.Errorf("%w: no JSON object found", ErrUnparseable)
	}
	if o, ok := decodeObject(cand); ok {
		return o, false, nil
	}
	if o, ok := decodeObject(repair(cand)); ok {
		return o, false, nil
	}
	for _, src := range []string{cand, text} {
		if m := scoresObject.FindAllStringSubmatch(src, -1); len(m) > 0 {
			inner := m[len(m)-1][1]
			so, ok := decodeObject(inner)
			if !ok {
				so, ok = decodeObject(repair(inner))
			}
			if ok {
				return map[string]any{"scores": so}, true, nil
			}
		}
	}
	return nil, false, fmt.Errorf("%w: JSON candidate does not decode, even after repairs", ErrUnparseable)
}

// findCandidate applies the published search order.
func findCandidate(text string) (string, bool) {
	var fencedObj string
	found := false
	blocks := fencedBlock.FindAllStringSubmatch(text, -1)
	for i := len(blocks) - 1; i >= 0; i-- {
		b := pytext.Strip(blocks[i][1])
		if !strings.HasPrefix(b, "{") || !strings.HasSuffix(b, "}") {
			continue
		}
		if strings.Contains(b, `"scores"`) {
			return b, true
		}
		if !found {
			fencedObj, found = b, true
		}
	}
	if found {
		return fencedObj, true
	}
	spans := balancedObjects(text)
	for i := len(spans) - 1; i >= 0; i-- {
		if strings.Contains(spans[i], `"scores"`) {
			return spans[i], true
		}
	}
	if len(spans) > 0 {
		return spans[len(spans)-1], true
	}
	return backwardMatch(text)
}

// balancedObjects returns the top-level {...} spans of s, left to right, in
// one pass: a '{' at depth 0 opens a span and the '}' that brings the depth
// back to 0 closes it. Inside a span, braces within JSON double-quoted
// strings are not counted, so a brace in a weakness text does not end the
// object early. A span that never closes swallows the rest of the text; the
// backward match is the fallback for that case.
func balancedObjects(s string) []string {
	var out []string
	depth, start, inStr, esc := 0, 0, false, false
	for j := 0; j < len(s); j++ {
		c := s[j]
		switch {
		case depth == 0:
			if c == '{' {
				depth, start = 1, j
			}
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				out = append(out, s[start:j+1])
			}
		}
	}
	return out
}

// backwardMatch takes the last '}' and walks back counting braces (quotes
// ignored) to the '{' that balances it: the last resort for answers whose
// quoting confuses the forward scan.
func backwardMatch(s string) (string, bool) {
	end := strings.LastIndexByte(s, '}')
	if end < 0 {
		return "", false
	}
	depth := 0
	for j := end; j >= 0; j-- {
		switch s[j] {
		case '}':
			depth++
		case '{':
			depth--
			if depth == 0 {
				return s[j : end+1], true
			}
		}
	}
	return "", false
}

// repair fixes the three slips judges make most: trailing commas before a
// closing bracket, bare keys and single-quoted keys.
func repair(s string) string {
	s = trailingComa.ReplaceAllString(s, "$1")
	s = singleKey.ReplaceAllString(s, `$1"$2"$3:`)
	s = unquotedKey.ReplaceAllString(s, `$1"$2"$3:`)
	return s
}

// decodeObject decodes s as one JSON object, numbers kept as json.Number.
func decodeObject(s string) (map[string]any, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false // trailing data after the object
	}
	m, ok := v.(map[string]any)
	return m, ok
}

// dimensionValue converts one score as the published script does, then
// clamps values above 0 into 1..5:
//
//   - an integer is taken as is (any size; negatives saturate at the int
//     range);
//   - JSON true is 1 and false is 0 (Python's bool is an int);
//   - a number with a fraction or exponent is a float, rounded half to even
//     (Python's round: 2.5 → 2, 3.5 → 4); a literal beyond float range is 0;
//   - a string is read as Python's int() reads the text before its first
//     '/' ("4/5" → 4, " 4 " → 4, "+3" → 3, "1_0" → 10); a string int()
//     rejects ("4.5", "four", "") is 0; only ASCII digits are accepted;
//   - anything else (null, a list, an object) is 0.
func dimensionValue(v any) int {
	return min(dimensionRaw(v), 5)
}

// dimensionRaw is dimensionValue before the clamp above 5, so a strict
// reader (ParseStrict) can tell a 7 from a 5.
func dimensionRaw(v any) int {
	var n int
	switch x := v.(type) {
	case bool:
		if x {
			n = 1
		}
	case json.Number:
		n = numberValue(string(x))
	case string:
		num, _, _ := strings.Cut(x, "/")
		n = pyInt(num)
	}
	return n
}

func numberValue(lit string) int {
	if !strings.ContainsAny(lit, ".eE") {
		return bigToInt(lit)
	}
	f, err := json.Number(lit).Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0 // out of float range: Python's round() raises on infinity
	}
	r := pytext.RoundHalfEven(f)
	switch {
	case r >= math.MaxInt64:
		return math.MaxInt64
	case r < math.MinInt64:
		return math.MinInt64
	}
	return int(r)
}

// bigToInt converts an integer literal of any length, saturating.
func bigToInt(digits string) int {
	b, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return 0
	}
	switch {
	case b.Sign() > 0 && !b.IsInt64():
		return math.MaxInt64
	case b.Sign() < 0 && !b.IsInt64():
		return math.MinInt64
	}
	return int(b.Int64())
}

// pyInt is Python's int(str) restricted to ASCII digits, 0 where Python
// raises ValueError.
func pyInt(s string) int {
	s = pytext.Strip(s)
	if s == "" {
		return 0
	}
	body := s
	if body[0] == '+' || body[0] == '-' {
		body = body[1:]
	}
	if body == "" || body[0] == '_' || body[len(body)-1] == '_' || strings.Contains(body, "__") {
		return 0
	}
	for _, c := range body {
		if (c < '0' || c > '9') && c != '_' {
			return 0
		}
	}
	return bigToInt(strings.ReplaceAll(s, "_", ""))
}

// stringList reads strengths or weaknesses: a list of strings (other
// elements are written as JSON), or a single string.
func stringList(v any) []string {
	switch x := v.(type) {
	case string:
		if pytext.Strip(x) == "" {
			return nil
		}
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
				continue
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if enc.Encode(e) == nil {
				out = append(out, strings.TrimSuffix(buf.String(), "\n"))
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return nil
}
