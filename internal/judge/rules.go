package judge

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/domain"
	"github.com/agentworld/agentworld/internal/pytext"
	"github.com/agentworld/agentworld/internal/score"
	"github.com/agentworld/agentworld/internal/trajectory"
)

// RulesJudge is the judge name recorded on rows scored by Rules.
const RulesJudge = score.RulesJudgeName

// Rules scores a prediction against the record's ground truth with
// deterministic checks only, for iterating without an LLM judge. It is NOT
// the rubric judge: its numbers measure textual agreement, not the judgement
// of a model, and are not comparable with published AgentWorldBench scores.
//
// Each check yields a fraction x in [0, 1], mapped to 1 + round(4x):
//
//   - Format: where the ground truth is JSON, the prediction must be JSON of
//     the same kind with the same key paths; for the terminal, the screen
//     must end with the same prompt line and echo the typed command; for GUI
//     states (Android, Web, OS) the lines must have the tree shape of the
//     ground truth (line signatures, bids, element JSON, table columns);
//     otherwise the line signatures are compared.
//   - Factuality: share of the ground truth's deterministic content found
//     exactly in the prediction, after runtime metadata (timestamps,
//     durations, long ids, hex) is masked: for JSON every leaf value by
//     path; for text the lines that are new at this turn (not in the
//     recent history), or all lines when none is new.
//   - Consistency: share of the ground truth lines that already appeared in
//     the last three observations of the history (pre-existing content) and
//     are reproduced verbatim; the token F1 when there are none.
//   - Realism: length agreement (shorter/longer), zero when the prediction
//     addresses an evaluator (score requests, evaluation tags).
//   - Quality: token F1 between masked prediction and ground truth.
//
// An exact match after whitespace normalization scores 5 everywhere; an
// empty prediction or conversation.NoOutput scores 1 everywhere.
func Rules(rec *trajectory.Record, prediction string) (score.Scores, Verdict) {
	pred := conversation.StripObservationMarker(prediction)
	truth := ""
	if rec.TurnIdx >= 1 && rec.TurnIdx <= len(rec.Response) {
		truth = conversation.StripObservationMarker(rec.Response[rec.TurnIdx-1])
	}
	var v Verdict
	if pred == "" || pred == conversation.NoOutput {
		v.Weaknesses = []string{"no prediction"}
		return uniform(1), v
	}
	if normalizeText(pred) == normalizeText(truth) {
		v.Strengths = []string{"matches the ground truth exactly (whitespace aside)"}
		return uniform(5), v
	}
	d := domain.FromTask(rec.Task)
	// Metadata is masked once per text; the checks below all read the
	// masked forms (rows average ~185 KB, the mask is a large alternation).
	mp, mt := maskMeta(pred), maskMeta(truth)
	predLines, truthLines := normalizedLines(mp), normalizedLines(mt)

	format, note := formatCheck(d, rec, pred, truth)
	note.add(&v, "format")

	cons, preexisting, fresh := preservation(rec, truthLines, predLines)
	var fact float64
	if tj, ok := asJSON(truth); ok {
		pj, _ := asJSON(pred)
		fact = recall(leaves(tj), leaves(pj))
	} else if len(fresh) > 0 {
		fact = recall(fresh, predLines)
	} else {
		fact = recall(truthLines, predLines)
	}
	addScore(&v, fact, "deterministic content matches the ground truth", "deterministic content differs from the ground truth")

	quality := tokenF1(mp, mt)
	if preexisting == 0 {
		cons = quality
	}
	addScore(&v, cons, "pre-existing content preserved", "pre-existing content not preserved")

	realism := lengthAgreement(mp, mt)
	if reason, _ := Manipulation(pred, truth); reason != "" {
		realism = 0
		v.Weaknesses = append(v.Weaknesses, "prediction addresses the evaluator ("+reason+")")
	}
	return score.Scores{
		Format:      scale(format),
		Factuality:  scale(fact),
		Consistency: scale(cons),
		Realism:     scale(realism),
		Quality:     scale(quality),
	}, v
}

func uniform(n int) score.Scores {
	return score.Scores{Format: n, Factuality: n, Consistency: n, Realism: n, Quality: n}
}

// scale maps a fraction in [0, 1] onto 1..5.
func scale(x float64) int {
	x = min(max(x, 0), 1)
	return 1 + int(pytext.RoundHalfEven(4*x))
}

type checkNote struct {
	ok   bool
	text string
}

func (n checkNote) add(v *Verdict, what string) {
	if n.text == "" {
		return
	}
	if n.ok {
		v.Strengths = append(v.Strengths, what+": "+n.text)
	} else {
		v.Weaknesses = append(v.Weaknesses, what+": "+n.text)
	}
}

func addScore(v *Verdict, x float64, good, bad string) {
	switch {
	case x >= 0.9:
		v.Strengths = append(v.Strengths, good)
	case x < 0.5:
		v.Weaknesses = append(v.Weaknesses, fmt.Sprintf("%s (%.0f%% kept)", bad, 100*x))
	}
}

// normalizeText collapses horizontal whitespace and trims every line.
// Runs of blanks never span a newline, so the whole text is collapsed at
// once (one allocation, not one per line).
func normalizeText(s string) string {
	lines := strings.Split(collapseBlanks(strings.ReplaceAll(s, "\r\n", "\n")), "\n")
	for i, l := range lines {
		lines[i] = pytext.Strip(l)
	}
	return pytext.Strip(strings.Join(lines, "\n"))
}

// maskedLines returns the non-empty lines of s, whitespace-normalized, with
// runtime metadata masked.
func maskedLines(s string) []string { return normalizedLines(maskMeta(s)) }

// normalizedLines is the normalized non-empty lines of already masked text:
// the non-empty lines of normalizeText(masked), found without joining and
// splitting the text again (each line is already stripped, so the final
// strip of normalizeText only removes empty lines at either end).
func normalizedLines(masked string) []string {
	var out []string
	for l := range strings.SplitSeq(collapseBlanks(strings.ReplaceAll(masked, "\r\n", "\n")), "\n") {
		if l = pytext.Strip(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// recall is the share of want (a multiset) found in got.
func recall(want, got []string) float64 {
	if len(want) == 0 {
		if len(got) == 0 {
			return 1
		}
		return 0
	}
	have := make(map[string]int, len(got))
	for _, g := range got {
		have[g]++
	}
	hit := 0
	for _, w := range want {
		if have[w] > 0 {
			have[w]--
			hit++
		}
	}
	return float64(hit) / float64(len(want))
}

// multisetJaccard compares two multisets.
func multisetJaccard(a, b []string) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	ca := map[string]int{}
	for _, x := range a {
		ca[x]++
	}
	inter := 0
	for _, x := range b {
		if ca[x] > 0 {
			ca[x]--
			inter++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// tokenF1 is the bag-of-tokens F1 of two texts whose metadata is masked.
// Recall and precision share their hits (the size of the multisets'
// intersection), so one count of the truth's tokens serves both.
func tokenF1(pred, truth string) float64 {
	have := make(map[string]int)
	nt := 0
	for w := range strings.FieldsSeq(truth) {
		have[w]++
		nt++
	}
	np, hit := 0, 0
	for w := range strings.FieldsSeq(pred) {
		np++
		if have[w] > 0 {
			have[w]--
			hit++
		}
	}
	if np == 0 || nt == 0 {
		if np == nt {
			return 1
		}
		return 0
	}
	r := float64(hit) / float64(nt)
	prec := float64(hit) / float64(np)
	if r+prec == 0 {
		return 0
	}
	return 2 * r * prec / (r + prec)
}

func lengthAgreement(pred, truth string) float64 {
	a, b := len(pred), len(truth)
	if a == 0 || b == 0 {
		if a == b {
			return 1
		}
		return 0
	}
	return float64(min(a, b)) / float64(max(a, b))
}

// historyWindow is how many earlier observations count as "already
// visible": the screen, page or tree an action acts on is the latest one,
// and a bounded window keeps the cost flat on long trajectories.
const historyWindow = 3

// preservation splits the ground truth lines into those already visible in
// the last historyWindow observations (pre-existing) and the new ones; it returns the share of
// pre-existing lines the prediction reproduces, how many there were, and the
// new lines.
func preservation(rec *trajectory.Record, truthLines, predLines []string) (float64, int, []string) {
	seen := map[string]bool{}
	for i := max(0, rec.TurnIdx-1-historyWindow); i < rec.TurnIdx-1 && i < len(rec.Response); i++ {
		for _, l := range maskedLines(conversation.StripObservationMarker(rec.Response[i])) {
			seen[l] = true
		}
	}
	var pre, fresh []string
	for _, l := range truthLines {
		if seen[l] {
			pre = append(pre, l)
		} else {
			fresh = append(fresh, l)
		}
	}
	if len(pre) == 0 {
		return 0, 0, fresh
	}
	return recall(pre, predLines), len(pre), fresh
}

func asJSON(s string) (any, bool) {
	s = pytext.Strip(s)
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, false
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, false
	}
	return v, true
}

// leaves flattens a JSON value into "path=value" strings (metadata masked);
// JSON text embedded in a string (an MCP text item) is flattened as well.
func leaves(v any) []string {
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case string:
			if inner, ok := asJSON(x); ok {
				walk(path+">", inner)
				return
			}
			out = append(out, path+"="+maskMeta(x))
		default:
			b, _ := json.Marshal(x)
			out = append(out, path+"="+string(b))
		}
	}
	walk("", v)
	return out
}

// keyPaths is the set of object key paths of a JSON value, array indexes
// collapsed, sorted.
func keyPaths(v any) []string {
	set := map[string]bool{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				set[path+"."+k] = true
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(path+"[]", e)
			}
		case string:
			if inner, ok := asJSON(x); ok {
				walk(path+">", inner)
			}
		}
	}
	walk("", v)
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// formatCheck returns the format fraction and a note for the verdict.
func formatCheck(d domain.Domain, rec *trajectory.Record, pred, truth string) (float64, checkNote) {
	if tj, ok := asJSON(truth); ok {
		pj, ok := asJSON(pred)
		if !ok {
			return 0, checkNote{text: "the ground truth is JSON but the prediction is not valid JSON"}
		}
		if fmt.Sprintf("%T", tj) != fmt.Sprintf("%T", pj) {
			return 0.25, checkNote{text: "JSON of a different kind than the ground truth"}
		}
		x := 0.5 + 0.5*multisetJaccard(keyPaths(tj), keyPaths(pj))
		return x, checkNote{ok: x >= 0.9, text: "JSON with the ground truth's structure"}
	}
	switch d {
	case domain.Terminal:
		return terminalFormat(rec, pred, truth)
	case domain.Android, domain.Web, domain.OS:
		return treeFormat(d, pred, truth)
	}
	x := multisetJaccard(signatures(pred), signatures(truth))
	return x, checkNote{ok: x >= 0.9, text: "line layout like the ground truth"}
}

// signature reduces a line to its shape: indentation kept, quoted strings
// and numbers masked, only the first three fields.
func signature(line string) string {
	indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
	var b strings.Builder
	b.WriteString(indent)
	n := 0
	for f := range strings.FieldsSeq(shapeBody(line)) {
		if n == 3 {
			break
		}
		if n > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f)
		n++
	}
	return b.String()
}

func signatures(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if pytext.Strip(l) != "" {
			out = append(out, signature(l))
		}
	}
	return out
}

func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	return strings.TrimRight(s[strings.LastIndexByte(s, '\n')+1:], " \t\r")
}

// terminalFormat checks the screen's prompt line, the echo of the typed
// command and the layout.
func terminalFormat(rec *trajectory.Record, pred, truth string) (float64, checkNote) {
	parts := []float64{}
	var bad []string
	if lastLine(pred) == lastLine(truth) {
		parts = append(parts, 1)
	} else {
		parts = append(parts, 0)
		bad = append(bad, "the screen does not end with the ground truth's prompt line")
	}
	if cmds := typedCommands(rec); len(cmds) > 0 {
		hit := 0
		for _, c := range cmds {
			if strings.Contains(pred, c) {
				hit++
			}
		}
		parts = append(parts, float64(hit)/float64(len(cmds)))
		if hit < len(cmds) {
			bad = append(bad, "the typed command is not echoed")
		}
	}
	parts = append(parts, multisetJaccard(signatures(pred), signatures(truth)))
	x := mean(parts)
	if len(bad) > 0 {
		return x, checkNote{text: strings.Join(bad, "; ")}
	}
	return x, checkNote{ok: true, text: "prompt and echo shaped like the terminal"}
}

// typedCommands returns the commands the evaluated action of rec runs.
func typedCommands(rec *trajectory.Record) []string {
	action := rec.CurrentPrompt
	if action == "" && rec.TurnIdx >= 1 && rec.TurnIdx <= len(rec.Prompt) {
		action = rec.Prompt[rec.TurnIdx-1]
	}
	return TypedCommands(action)
}

// TypedCommands reads the keystrokes of a terminal action prompt (a JSON
// list of {keystrokes, duration} after the "**Action:**" line) and returns
// the commands it runs — keystrokes ending in a newline — without that
// newline; nil when the action holds no such list.
func TypedCommands(action string) []string {
	start := strings.IndexByte(action, '[')
	end := strings.LastIndexByte(action, ']')
	if start < 0 || end <= start {
		return nil
	}
	var keys []struct {
		Keystrokes string `json:"keystrokes"`
	}
	if json.Unmarshal([]byte(action[start:end+1]), &keys) != nil {
		return nil
	}
	var out []string
	for _, k := range keys {
		if c := pytext.Strip(k.Keystrokes); c != "" && strings.HasSuffix(k.Keystrokes, "\n") {
			out = append(out, c)
		}
	}
	return out
}

// treeFormat checks that a GUI state keeps the tree shape of the ground
// truth: line signatures, plus per domain the bid labels (Web), the element
// JSON (Android) or the table columns (OS).
func treeFormat(d domain.Domain, pred, truth string) (float64, checkNote) {
	shape := multisetJaccard(signatures(pred), signatures(truth))
	got, want := TreeNodeShare(d, pred, truth)
	node := 1.0
	if want > 0 {
		node = min(got/want, 1)
	}
	x := (shape + node) / 2
	if x >= 0.9 {
		return x, checkNote{ok: true, text: "tree shaped like the ground truth"}
	}
	return x, checkNote{text: fmt.Sprintf("tree shape differs from the ground truth (%.0f%% of node lines well formed)", 100*got)}
}

// TreeNodeShare measures whether a GUI state keeps the tree syntax of its
// domain: got and want are the shares of non-empty lines of the prediction
// and of the ground truth that are well-formed nodes — a [bid] label (Web),
// a trailing element JSON object (Android), or the ground truth's usual
// number of tab-separated columns (OS). Other domains have no node syntax
// and give 0, 0.
func TreeNodeShare(d domain.Domain, pred, truth string) (got, want float64) {
	pl := nonEmptyLines(pred)
	tl := nonEmptyLines(truth)
	var per func(string) bool
	switch d {
	case domain.Web:
		per = hasBid
	case domain.Android:
		per = func(l string) bool {
			m := trailingObject(l)
			if m == "" {
				return false
			}
			var v map[string]any
			return json.Unmarshal([]byte(m), &v) == nil
		}
	case domain.OS:
		cols := modalColumns(tl)
		per = func(l string) bool { return strings.Count(l, "\t") == cols }
	default:
		return 0, 0
	}
	return share(pl, per), share(tl, per)
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if pytext.Strip(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func share(lines []string, ok func(string) bool) float64 {
	if len(lines) == 0 {
		return 0
	}
	n := 0
	for _, l := range lines {
		if ok(l) {
			n++
		}
	}
	return float64(n) / float64(len(lines))
}

func modalColumns(lines []string) int {
	count := map[int]int{}
	best, bestN := 0, 0
	for _, l := range lines {
		c := strings.Count(l, "\t")
		count[c]++
		if count[c] > bestN || (count[c] == bestN && c < best) {
			best, bestN = c, count[c]
		}
	}
	return best
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
