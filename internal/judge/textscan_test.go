package judge

import (
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentworld/agentworld/internal/conversation"
	"github.com/agentworld/agentworld/internal/pytext"
	"github.com/agentworld/agentworld/internal/trajectory"
	"github.com/google/go-cmp/cmp"
)

// The expressions the rules scorer was published with. The scanners of
// textscan.go must give exactly what these give, on any input, so that
// rules scores stay the same; the reference functions below are the
// scorer's former code, kept only here.
var (
	refMeta = regexp.MustCompile(strings.Join([]string{
		`\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?`,
		`\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b`,
		`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`,
		`\b(?:0x)?[0-9a-f]{12,}\b`,
		`\b\d+(?:\.\d+)?\s?(?:ms|s|sec|seconds)\b`,
		`\b\d{7,}\b`,
	}, "|"))
	refSpaceRun = regexp.MustCompile(`[ \t]+`)
	refQuoted   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	refDigits   = regexp.MustCompile(`\d+`)
	refBid      = regexp.MustCompile(`\[[A-Za-z0-9_.-]+\]`)
	refTrailing = regexp.MustCompile(`\{.*\}\s*$`)
)

func refMaskMeta(s string) string {
	if !strings.ContainsAny(s, "0123456789") {
		return s
	}
	return refMeta.ReplaceAllString(s, "<meta>")
}

func refNormalizeText(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = pytext.Strip(refSpaceRun.ReplaceAllString(l, " "))
	}
	return pytext.Strip(strings.Join(lines, "\n"))
}

func refNormalizedLines(masked string) []string {
	var out []string
	for _, l := range strings.Split(refNormalizeText(masked), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

func refSignature(line string) string {
	indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
	body := refDigits.ReplaceAllString(refQuoted.ReplaceAllString(line, "S"), "0")
	f := strings.Fields(body)
	if len(f) > 3 {
		f = f[:3]
	}
	return indent + strings.Join(f, " ")
}

func refLastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, " \t\r\n"), "\n")
	return strings.TrimRight(lines[len(lines)-1], " \t\r")
}

// refTokenF1 is the token F1 as two recalls, as it was published.
func refTokenF1(pred, truth string) float64 {
	p, t := strings.Fields(pred), strings.Fields(truth)
	if len(p) == 0 || len(t) == 0 {
		if len(p) == len(t) {
			return 1
		}
		return 0
	}
	r := recall(t, p)
	prec := recall(p, t)
	if r+prec == 0 {
		return 0
	}
	return 2 * r * prec / (r + prec)
}

// checkScanners compares every scanner with its expression on one text.
func checkScanners(t *testing.T, s string) {
	t.Helper()
	if got, want := maskMeta(s), refMaskMeta(s); got != want {
		t.Errorf("maskMeta(%q)\n got %q\nwant %q", s, got, want)
	}
	if got, want := normalizeText(s), refNormalizeText(s); got != want {
		t.Errorf("normalizeText(%q)\n got %q\nwant %q", s, got, want)
	}
	if diff := cmp.Diff(refNormalizedLines(s), normalizedLines(s)); diff != "" {
		t.Errorf("normalizedLines(%q) (-want +got):\n%s", s, diff)
	}
	if got, want := lastLine(s), refLastLine(s); got != want {
		t.Errorf("lastLine(%q) = %q, want %q", s, got, want)
	}
	for l := range strings.SplitSeq(s, "\n") {
		if got, want := signature(l), refSignature(l); got != want {
			t.Errorf("signature(%q) = %q, want %q", l, got, want)
		}
		if got, want := hasBid(l), refBid.MatchString(l); got != want {
			t.Errorf("hasBid(%q) = %v, want %v", l, got, want)
		}
	}
	// tokenF1 against a text sharing some of s's tokens.
	other := s[len(s)/3:] + " " + strings.ToUpper(s[:len(s)/3]) + " x y"
	for _, p := range [][2]string{{s, other}, {other, s}, {s, s}, {s, ""}, {"", s}} {
		if got, want := tokenF1(p[0], p[1]), refTokenF1(p[0], p[1]); got != want {
			t.Errorf("tokenF1(%q, %q) = %v, want %v", p[0], p[1], got, want)
		}
	}
	// trailingObject is used on lines but must hold on any text.
	if got, want := trailingObject(s), refTrailing.FindString(s); got != want {
		t.Errorf("trailingObject(%q) = %q, want %q", s, got, want)
	}
}

// scannerCases are texts at the edges of the expressions.
var scannerCases = []string{
	"",
	"no digits at all, deadbeefcafebabe",
	"at 2025-03-14T09:21:07Z and 2025-03-14 09:21 and 2025-03-14T09:21:07.123+01:00 done",
	"2025-03-14T09:21deadbeefcafe1 x", // a match ending inside a word
	"x2025-03-14 09:21 _12:00:00 a12:00:00",
	"clock 9:05:07 and 09:05:07.5s and 12:00:00: and 123:45:67",
	"uuid 123e4567-e89b-12d3-a456-426614174000 and ABCDEF12-ABCD-ABCD-ABCD-ABCDEF123456x",
	"hex 0xdeadbeefcafe 0xDEADBEEFCAFE deadbeefcafe1 deadbeefcaf 0x123 00xabcdefabcdef",
	"took 12ms, 3 s, 4.5 seconds, 7sec, 8\tms, 9\nms, 10  ms, 11.ms 12.5.6s 1s2",
	"ids 1234567 123456 12345678901234567890 1234567a 1234567_",
	"ünïcødé 2025-01-01T00:00 数据\u2028 12:34:56",
	"a\r\nb  c\t\td\r\n\r\n  \n\x1c e \x1f",
	`  "quoted 123" 'single 45' 6 "unclosed 7`,
	`"esc \" still 8" 'it\'s 9' "bs\\" 10 "nl \` + "\n" + `x"`,
	`'a"b' "c'd" ''  "" 0 00 007 a0b`,
	`\"x\" '\\' "\`,
	"[bid] [a.b-c_9] [] [x y] [[z]] [é]",
	`  node {"a": 1}  `,
	"{a}\n{b} \t\r\n",
	"x {y\nz} ",
	"{}}",
	"}{",
	"a { b } c }",
	"\n\n  \n",
	"root@4c1f2e9a7b3d:/app# ls\nfile\nroot@4c1f2e9a7b3d:/app#  \r\n",
}

func TestScannersMatchExpressions(t *testing.T) {
	for _, s := range scannerCases {
		checkScanners(t, s)
	}
	// Every observation and action of the shipped examples.
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "bench", "*_test.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example data: %v", err)
	}
	for _, path := range files {
		recs, err := trajectory.ReadFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			for _, s := range append(append([]string{r.SystemStr, r.CurrentPrompt}, r.Prompt...), r.Response...) {
				checkScanners(t, s)
				checkScanners(t, conversation.StripObservationMarker(s))
			}
		}
	}
	// Random texts over the characters the expressions care about.
	const alphabet = "0123456789012345abcdefxABCDEFTZms-:.+ \t\n\r\"'\\[]{}_é数"
	runes := []rune(alphabet)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := rng.IntN(40)
		var b strings.Builder
		for range n {
			b.WriteRune(runes[rng.IntN(len(runes))])
		}
		checkScanners(t, b.String())
		if t.Failed() {
			return
		}
	}
}

// FuzzScannersMatchExpressions holds the scanners to the expressions on
// arbitrary text.
func FuzzScannersMatchExpressions(f *testing.F) {
	for _, s := range scannerCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkScanners(t, s)
	})
}
